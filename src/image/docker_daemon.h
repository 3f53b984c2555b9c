// docker-daemon:NAME[:TAG], as skopeo spells it: the image a local Docker Engine (or podman's
// Docker-compatible service) holds, fetched through the Engine API's `GET /images/{name}/get`,
// which streams a docker-archive.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "image/capture.h"
#include "image/store.h"
#include "util/limits.h"

namespace imgcheck::image {

/// Where the Engine API listens: DOCKER_HOST's value (unix:///path or tcp://host:port), else
/// unix:///var/run/docker.sock. Splits it into the URL prefix to request and the socket path
/// ("" for tcp). util::Fatal for another scheme.
struct DaemonEndpoint {
  std::string base_url;     ///< "http://localhost" for a socket, "http://host:port" for tcp
  std::string unix_socket;  ///< "/var/run/docker.sock"; "" for tcp
  std::string host;         ///< as configured, for messages
};
DaemonEndpoint DaemonFromEnv(const char* docker_host);

/// The Engine API path that exports `name` ("nvidia/cuda:12.4" -> "/images/nvidia/cuda:12.4/get");
/// a name without tag or digest gets ":latest", as docker does.
std::string DaemonExportPath(std::string_view name);

/// The docker-archive the daemon exports for `name`, read once as it streams (no bytes touch
/// the disk): manifests, configs and other small members are kept in memory; each layer blob is
/// read with `capture` (and `digests`) as it passes (FileStore::Preread), to be verified by the
/// pipeline against the manifest and config that arrive after it. util::Fatal when the daemon
/// cannot be reached or refuses.
std::unique_ptr<FileStore> OpenDaemonStore(std::string_view name, const CapturePolicy& capture,
                                           const util::Limits& limits = {},
                                           const DigestPlan& digests = {});

}  // namespace imgcheck::image

// docker-daemon:NAME[:TAG], as skopeo spells it: the image a local Docker Engine (or podman's
// Docker-compatible service) holds, fetched through the Engine API's `GET /images/{name}/get`,
// which streams a docker-archive.
#pragma once

#include <string>
#include <string_view>

#include "image/image.h"

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

/// Reads docker-daemon:`name` through the verifying docker-archive pipeline. The archive is
/// spooled to a private mkdtemp directory (mode 0700), removed before returning: the
/// docker-archive reader seeks between members, which a socket stream cannot.
Image LoadDockerDaemon(std::string_view name, const LoadOptions& options);

}  // namespace imgcheck::image

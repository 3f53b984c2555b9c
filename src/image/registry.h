// The registry transport: a Source over the OCI distribution API (docker://REF or a bare REF).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "image/registry_auth.h"
#include "image/source.h"

namespace imgcheck::image {

struct RegistryOptions {
  /// --creds and --authfile. A credential goes only to the registry it names (and to the token
  /// service that registry names), never across origins on a redirect.
  CredentialSources credentials;
  /// `serve --allow-registry` (HOST[:PORT], docker.io for Docker Hub): manifest, tag and token
  /// requests redirected anywhere else are refused. Empty: followed anywhere, credentials left
  /// behind.
  std::vector<std::string> allow_registries;
  /// --allow-blob-host (HOST, HOST:PORT or *.DOMAIN): where a blob request may be redirected
  /// besides the registry's own origin. When this or allow_registries is set, a blob redirect
  /// to any other host is refused; when neither is, blobs follow redirects anywhere (object
  /// stores and CDNs), credentials left behind.
  std::vector<std::string> allow_blob_hosts;
  bool tls_verify = true;  ///< --tls-verify=false turns certificate checks off
  std::string cert_dir;    ///< --cert-dir: extra CA certificates (*.crt), client cert/key
  std::string ca_cert;     ///< --ca-cert: one CA bundle file
  /// Waits before a retry (back-off, Retry-After); null: std::this_thread::sleep_for. Tests
  /// pass one that records the waits instead of sleeping.
  std::function<void(std::chrono::milliseconds)> sleep;
  /// util::Limits::read_timeout_s and deadline_s (Load copies them from LoadOptions::limits):
  /// a registry that sends (next to) nothing this long, and the whole image from OpenRegistry on.
  int read_timeout_s = 60;
  int deadline_s = 3600;
};

/// A source for `reference` ("nvidia/cuda:12.1.1-runtime-ubuntu22.04", "host:5000/x@sha256:...").
/// Throws util::Fatal with a message the user can act on.
std::unique_ptr<Source> OpenRegistry(const std::string& reference, const RegistryOptions& options);

/// Pushes to a registry (image::PushArtifact's registry half): uploads each of `blobs` the registry
/// does not have yet, then `manifest` (of `media_type`) under the reference's tag. Returns the
/// manifest digest.
std::string PushToRegistry(const std::string& reference, const std::vector<std::string>& blobs,
                           const std::string& manifest, std::string_view media_type,
                           const RegistryOptions& options);

}  // namespace imgcheck::image

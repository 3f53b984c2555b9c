// The registry transport: a Source over the OCI distribution API (docker://REF or a bare REF).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "image/source.h"

namespace imgcheck::image {

struct RegistryOptions {
  std::string creds;       ///< "USER:PASS" from --creds; empty: look up the auth files
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

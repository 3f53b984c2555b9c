// A real OCI registry for tests: Debian's docker-registry (the CNCF distribution registry) on
// 127.0.0.1, optionally with TLS (certificates made by openssl) and htpasswd auth, filled by
// skopeo. The image stage's tests and the attest stage's tests share it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "image/registry.h"
#include "support.h"

namespace imgcheck::testing {

/// A TCP connection to 127.0.0.1:`port`, or -1.
int ConnectLoopback(int port);

/// False, with the test case marked skipped, when a tool the registry tests run is missing.
bool HaveRegistryTools();

struct RegistryConfig {
  bool tls = false;
  std::string user, password;  ///< htpasswd auth when set
  bool client_certs = false;   ///< with tls: require a client certificate signed by the CA
};

/// docker-registry serving a fresh storage directory until destroyed (or Stop()).
class Registry {
 public:
  explicit Registry(RegistryConfig config);
  ~Registry() { Stop(); }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  void Stop();

  int port() const { return port_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::filesystem::path storage() const { return dir_ / "storage"; }
  std::filesystem::path ca() const { return dir_ / "certs/ca.crt"; }
  std::filesystem::path cert_dir() const { return dir_ / "certs"; }
  /// Where the registry keeps the bytes of blob `digest` ("sha256:...").
  std::filesystem::path BlobFile(const std::string& digest) const;

  /// Pushes image `src` ("oci:DIR:latest") as `repo_tag` with skopeo (by default keeping its
  /// digests).
  void Push(const std::string& src, const std::string& repo_tag,
            const std::string& flags = "--preserve-digests");

  /// Options that reach this registry: its CA, its credentials.
  image::RegistryOptions Options() const;

 private:
  void MakeCertificates();

  TempDir dir_;
  RegistryConfig config_;
  int port_;
  pid_t pid_ = -1;
};

/// Pushes one small image per tag to `reg` as "app:TAG" (a gzip layer of /etc/marker holding
/// TAG), written under `work`; returns their manifest digests in order.
std::vector<std::string> PushMarkerImages(Registry& reg, const std::filesystem::path& work,
                                          const std::vector<std::string>& tags);

}  // namespace imgcheck::testing

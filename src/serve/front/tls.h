// The server's certificate and key, read from files and read again when they change (cert-manager
// and kubelet secret updates replace them in place), so rotation needs no restart.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace imgcheck::serve::front {

class CertificateFiles {
 public:
  /// Loads the pair now: util::Fatal when it cannot be read or the key does not match.
  CertificateFiles(std::string cert, std::string key, std::chrono::milliseconds check_every);
  ~CertificateFiles();
  CertificateFiles(const CertificateFiles&) = delete;
  CertificateFiles& operator=(const CertificateFiles&) = delete;

  /// Makes `ctx` present the current pair on every handshake (SSL_CTX_set_cert_cb).
  void Attach(SSL_CTX* ctx);
  /// How many times the pair was loaded (1 after construction).
  int generation() const;

 private:
  struct Pair;
  /// The pair from the files, or null (with the reason in `why`) when they are not a pair yet.
  std::shared_ptr<Pair> Load(std::string& why) const;
  void Watch();
  static int OnCertificate(SSL* ssl, void* self);

  std::string cert_, key_;
  std::chrono::milliseconds every_;
  mutable std::mutex mu_;
  std::shared_ptr<Pair> current_;
  int generation_ = 0;
  std::filesystem::file_time_type cert_time_, key_time_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace imgcheck::serve::front

// SHA-256 through OpenSSL EVP, incremental, for blob and diff_id verification.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace imgcheck::util {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view bytes);
  /// Lower-case hex digest; the hasher cannot be updated afterwards.
  std::string HexDigest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// "sha256:<hex>" of `bytes`.
std::string Sha256Digest(std::string_view bytes);

}  // namespace imgcheck::util

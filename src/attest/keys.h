// Signing keys: ECDSA P-256 with SHA-256 through OpenSSL's EVP interface. Private keys are
// unencrypted PKCS#8 PEM ("BEGIN PRIVATE KEY", what `cosign import-key-pair` takes and
// `openssl genpkey` writes), public keys SubjectPublicKeyInfo PEM ("BEGIN PUBLIC KEY", which is
// also what `cosign generate-key-pair` writes as cosign.pub).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "util/error.h"

namespace imgcheck::attest {

/// A fresh P-256 key pair as PEM text.
struct KeyPair {
  std::string private_pem;  ///< PKCS#8, unencrypted: keep it secret
  std::string public_pem;   ///< SubjectPublicKeyInfo
};
KeyPair GenerateKeyPair();

/// A private key that signs. Not copyable state is shared: copies sign with the same key.
class Signer {
 public:
  /// Reads a PKCS#8 PEM P-256 private key; `name` names it in errors. A cosign encrypted key
  /// ("ENCRYPTED SIGSTORE PRIVATE KEY": scrypt and NaCl secretbox, which OpenSSL does not
  /// implement) is refused with what to do instead.
  static util::Expected<Signer> FromPem(std::string_view pem, const std::string& name);
  /// The DER ECDSA signature of SHA-256(`message`).
  std::string Sign(std::string_view message) const;
  /// The key id of the public half (PublicKey::KeyId).
  const std::string& KeyId() const { return key_id_; }

 private:
  std::shared_ptr<void> key_;  // EVP_PKEY
  std::string key_id_;
};

/// A public key that verifies.
class PublicKey {
 public:
  /// Reads a SubjectPublicKeyInfo PEM P-256 key; `name` names it in errors and KeyName().
  static util::Expected<PublicKey> FromPem(std::string_view pem, const std::string& name);
  /// True when `signature` (DER ECDSA) signs SHA-256(`message`) with this key.
  bool Verify(std::string_view message, std::string_view signature) const;
  /// Hex SHA-256 of the key's DER SubjectPublicKeyInfo (securesystemslib's keyid convention):
  /// what DSSE signatures name as `keyid`.
  const std::string& KeyId() const { return key_id_; }
  const std::string& name() const { return name_; }

 private:
  std::shared_ptr<void> key_;  // EVP_PKEY
  std::string key_id_;
  std::string name_;
};

/// Reads a key file (at most 64 KiB) and parses it; util::Fatal, one line, on failure.
Signer LoadSigner(const std::string& path);
PublicKey LoadPublicKey(const std::string& path);

}  // namespace imgcheck::attest

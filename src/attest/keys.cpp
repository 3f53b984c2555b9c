#include "attest/keys.h"

#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <filesystem>
#include <fstream>

#include "util/sha256.h"

namespace imgcheck::attest {
namespace {

constexpr size_t kMaxKeyFile = 64 << 10;

std::shared_ptr<void> Own(EVP_PKEY* key) {
  return {key, [](void* k) { EVP_PKEY_free(static_cast<EVP_PKEY*>(k)); }};
}

EVP_PKEY* Raw(const std::shared_ptr<void>& key) { return static_cast<EVP_PKEY*>(key.get()); }

// Whether `key` is an EC key on P-256 (prime256v1), the only curve cosign's ECDSA keys use.
bool IsP256(EVP_PKEY* key) {
  if (EVP_PKEY_get_base_id(key) != EVP_PKEY_EC) return false;
  char group[64] = {};
  size_t len = 0;
  return EVP_PKEY_get_group_name(key, group, sizeof group, &len) == 1 &&
         std::string_view(group, len) == "prime256v1";
}

std::string KeyIdOf(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  int len = i2d_PUBKEY(key, &der);
  if (len <= 0) return "";
  std::string id = util::Sha256Digest(std::string_view(reinterpret_cast<char*>(der), len));
  OPENSSL_free(der);
  return id.substr(id.find(':') + 1);
}

std::string ToPem(EVP_PKEY* key, bool private_key) {
  BIO* bio = BIO_new(BIO_s_mem());
  int ok = private_key ? PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr)
                       : PEM_write_bio_PUBKEY(bio, key);
  std::string out;
  if (ok == 1) {
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    out.assign(data, static_cast<size_t>(n));
  }
  BIO_free(bio);
  if (out.empty()) throw util::Fatal("cannot write a PEM key (OpenSSL)");
  return out;
}

std::string ReadKeyFile(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) throw util::Fatal("key " + path + ": " + ec.message());
  if (size > kMaxKeyFile)
    throw util::Fatal("key " + path + ": " + std::to_string(size) + " bytes is not a key file");
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw util::Fatal("key " + path + ": cannot read it");
  return text;
}

}  // namespace

KeyPair GenerateKeyPair() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) throw util::Fatal("cannot generate a P-256 key (OpenSSL)");
  std::shared_ptr<void> owned = Own(key);
  return {ToPem(key, true), ToPem(key, false)};
}

util::Expected<Signer> Signer::FromPem(std::string_view pem, const std::string& name) {
  if (pem.find("ENCRYPTED SIGSTORE PRIVATE KEY") != std::string_view::npos ||
      pem.find("ENCRYPTED COSIGN PRIVATE KEY") != std::string_view::npos) {
    return util::MakeError(
        name +
        " is a cosign encrypted key (scrypt and NaCl secretbox, which OpenSSL does not "
        "implement); use a PKCS#8 key from `imgcheck key generate` (cosign import-key-pair "
        "reads it too)");
  }
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr)
    return util::MakeError(name + " is not an unencrypted PKCS#8 PEM private key");
  Signer s;
  s.key_ = Own(key);
  if (!IsP256(key)) return util::MakeError(name + " is not an ECDSA P-256 key");
  s.key_id_ = KeyIdOf(key);
  return s;
}

std::string Signer::Sign(std::string_view message) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::string sig;
  size_t len = 0;
  bool ok =
      ctx != nullptr && EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, Raw(key_)) == 1 &&
      EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) == 1;
  if (ok) {
    sig.resize(len);
    ok =
        EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
    sig.resize(len);
  }
  EVP_MD_CTX_free(ctx);
  if (!ok) throw util::Fatal("signing failed (OpenSSL)");
  return sig;
}

util::Expected<PublicKey> PublicKey::FromPem(std::string_view pem, const std::string& name) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr) return util::MakeError(name + " is not a PEM public key (BEGIN PUBLIC KEY)");
  PublicKey k;
  k.key_ = Own(key);
  if (!IsP256(key)) return util::MakeError(name + " is not an ECDSA P-256 key");
  k.key_id_ = KeyIdOf(key);
  k.name_ = name;
  return k;
}

bool PublicKey::Verify(std::string_view message, std::string_view signature) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok =
      ctx != nullptr && EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, Raw(key_)) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

Signer LoadSigner(const std::string& path) {
  util::Expected<Signer> s = Signer::FromPem(ReadKeyFile(path), "key " + path);
  if (!s) throw util::Fatal(s.error().message);
  return std::move(s).value();
}

PublicKey LoadPublicKey(const std::string& path) {
  util::Expected<PublicKey> k = PublicKey::FromPem(ReadKeyFile(path), "key " + path);
  if (!k) throw util::Fatal(k.error().message);
  return std::move(k).value();
}

}  // namespace imgcheck::attest

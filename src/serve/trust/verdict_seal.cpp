#include "serve/trust/verdict_seal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>

#include "util/file.h"
#include "util/names.h"
#include "util/sha256.h"

namespace imgcheck::serve::trust {

namespace {

constexpr std::string_view kMagic = "imgcheck-verdict-mac/1 ";
constexpr size_t kMinKeyBytes = 32;
constexpr size_t kMaxKeyBytes = 4096;

std::string Hex(const unsigned char* p, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += "0123456789abcdef"[p[i] >> 4];
    out += "0123456789abcdef"[p[i] & 15];
  }
  return out;
}

}  // namespace

VerdictSeal::VerdictSeal(std::string key) : key_(std::move(key)) {
  if (!key_.empty())
    key_id_ = "k" + util::Sha256Digest("imgcheck verdict key\n" + key_).substr(7, 16);
}

std::string VerdictSeal::Mac(const std::string& name, const std::string& report) const {
  // Everything that gives the report its meaning is under the MAC: the format, the key id, the
  // store key (policy identity and digest) and the report's exact bytes, each length-prefixed.
  std::string message;
  for (const std::string* part : {&key_id_, &name, &report})
    message += std::to_string(part->size()) + ":" + *part + "\n";
  message.insert(0, kMagic);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return Hex(mac, len);
}

std::string VerdictSeal::Seal(const std::string& name, const std::string& report) const {
  if (!signing()) return report;
  return std::string(kMagic) + key_id_ + " " + Mac(name, report) + "\n" + report;
}

VerdictSeal::Check VerdictSeal::Open(const std::string& name, const std::string& stored,
                                     std::string& report) const {
  bool sealed = stored.starts_with(kMagic);
  size_t eol = stored.find('\n');
  if (!sealed || eol == std::string::npos) {
    if (signing()) return Check::kUnsigned;
    report = stored;
    return Check::kOk;
  }
  std::string header = stored.substr(kMagic.size(), eol - kMagic.size());
  report = stored.substr(eol + 1);
  if (!signing()) return Check::kOk;
  size_t space = header.find(' ');
  if (space == std::string::npos || header.substr(0, space) != key_id_) return Check::kOtherKey;
  std::string want = Mac(name, report), got = header.substr(space + 1);
  if (got.size() != want.size() || CRYPTO_memcmp(got.data(), want.data(), want.size()) != 0) {
    report.clear();
    return Check::kBadMac;
  }
  return Check::kOk;
}

util::Expected<std::string> VerdictSeal::ReadKeyFile(const std::string& path) {
  util::Expected<std::string> text = util::ReadFile(path, kMaxKeyBytes + 64);
  if (!text) return util::MakeError("--verdict-key-file: " + text.error().message);
  std::string key = std::move(text).value();
  while (!key.empty() &&
         (key.back() == '\n' || key.back() == '\r' || key.back() == ' ' || key.back() == '\t'))
    key.pop_back();
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) {
    return util::MakeError("--verdict-key-file " + path + ": a key must be 32 to 4096 bytes (" +
                           std::to_string(key.size()) +
                           " here); make one with `openssl rand -hex 32`");
  }
  return key;
}

namespace {

constexpr auto kCheckNames =
    std::to_array<util::EnumName<VerdictSeal::Check>>({{VerdictSeal::Check::kOk, "ok"},
                                                       {VerdictSeal::Check::kUnsigned, "unsigned"},
                                                       {VerdictSeal::Check::kOtherKey, "other_key"},
                                                       {VerdictSeal::Check::kBadMac, "bad_mac"}});
static_assert(util::NamesEvery(kCheckNames));

}  // namespace

std::string_view CheckName(VerdictSeal::Check c) { return util::Name(kCheckNames, c, "?"); }

}  // namespace imgcheck::serve::trust

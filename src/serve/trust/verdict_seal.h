// Verdicts in the shared store carry an HMAC-SHA256 (README "Trust model"): whoever can write
// to Redis but does not hold the key (`--verdict-key-file`, a mounted Secret) cannot make a
// replica believe a verdict it did not write, nor move a verdict to another digest or policy.
#pragma once

#include <string>
#include <string_view>

#include "util/error.h"

namespace imgcheck::serve::trust {

class VerdictSeal {
 public:
  /// `key`: the secret; empty for none (verdicts stored and read unsigned, which the command
  /// line allows only with --insecure-unsigned-verdicts).
  explicit VerdictSeal(std::string key = "");
  bool signing() const { return !key_.empty(); }
  /// "k" + 16 hex digits naming the key (a hash of it), or "" without a key.
  const std::string& key_id() const { return key_id_; }

  /// The value to store under `name` (the store key, which names the policy identity and the
  /// digest): a header line with the key id and the MAC over name and report, then the report.
  std::string Seal(const std::string& name, const std::string& report) const;

  enum class Check { kOk, kUnsigned, kOtherKey, kBadMac };
  /// Checks a stored value read from `name`; on kOk `report` is the report it holds. Without a
  /// key every value is kOk (a sealed one has its header dropped).
  Check Open(const std::string& name, const std::string& stored, std::string& report) const;

  /// Reads a key file: at least 32 bytes once trailing white space is dropped (a Secret made
  /// with `openssl rand -hex 32` or `head -c 32 /dev/urandom`). An error names the file only.
  static util::Expected<std::string> ReadKeyFile(const std::string& path);

 private:
  std::string Mac(const std::string& name, const std::string& report) const;
  std::string key_, key_id_;
};

/// The metric label of a failed check ("unsigned", "other_key", "bad_mac").
std::string_view CheckName(VerdictSeal::Check c);

}  // namespace imgcheck::serve::trust

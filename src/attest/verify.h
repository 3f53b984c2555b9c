// Verifying one attestation: the signature over the exact DSSE bytes by a trusted key, then the
// statement's type, subject, predicate type and policy identity. Each refusal has a reason
// (what serve's metrics count) and a one-line message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attest/keys.h"
#include "attest/statement.h"

namespace imgcheck::attest {

enum class Rejection : uint8_t {
  kNone,          ///< accepted
  kUnreadable,    ///< not an envelope, not a statement, too large, not of in-toto type
  kBadSignature,  ///< signed by a key it names as trusted, but the signature does not verify
  kOtherKey,      ///< no trusted key made the signature
  kOtherSubject,  ///< the statement is about another image
  kOtherType,     ///< another predicate type (another tool's attestation)
  kOtherPolicy,   ///< judged under another policy identity
};
/// "unreadable", "bad-signature", "other-key", "other-subject", "other-type", "other-policy".
std::string_view RejectionName(Rejection r);

struct Expectation {
  std::string digest;           ///< the image's manifest digest, "sha256:HEX"
  std::string policy_identity;  ///< scan::Policy::identity the verdict must have been made under
};

struct Checked {
  Rejection rejection = Rejection::kUnreadable;
  std::string message;  ///< why it was refused (one line); "" when accepted
  std::string key;      ///< the trusted key that signed it (PublicKey::name)
  Statement statement;  ///< filled once the signature verified
  bool ok() const { return rejection == Rejection::kNone; }
};

/// Verifies envelope bytes `envelope` against `keys` and `expect`.
Checked Verify(std::string_view envelope, const std::vector<PublicKey>& keys,
               const Expectation& expect);

}  // namespace imgcheck::attest

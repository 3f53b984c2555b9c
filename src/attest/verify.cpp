#include "attest/verify.h"

#include <algorithm>

#include "attest/dsse.h"

namespace imgcheck::attest {

std::string_view RejectionName(Rejection r) {
  switch (r) {
    case Rejection::kNone:
      return "none";
    case Rejection::kUnreadable:
      return "unreadable";
    case Rejection::kBadSignature:
      return "bad-signature";
    case Rejection::kOtherKey:
      return "other-key";
    case Rejection::kOtherSubject:
      return "other-subject";
    case Rejection::kOtherType:
      return "other-type";
    case Rejection::kOtherPolicy:
      return "other-policy";
  }
  return "unreadable";
}

namespace {

Checked Refuse(Rejection r, std::string message) {
  Checked c;
  c.rejection = r;
  c.message = std::move(message);
  return c;
}

// Whether the predicate names a scanned manifest (image.manifestDigest) other than the subject.
bool ScannedOther(const Statement& s) {
  auto image = s.predicate.find("image");
  if (image == s.predicate.end() || !image->is_object()) return false;
  auto scanned = image->find("manifestDigest");
  if (scanned == image->end() || !scanned->is_string() || scanned->empty()) return false;
  return std::find(s.subject_digests.begin(), s.subject_digests.end(),
                   scanned->get<std::string>()) == s.subject_digests.end();
}

}  // namespace

Checked Verify(std::string_view envelope, const std::vector<PublicKey>& keys,
               const Expectation& expect) {
  util::Expected<Envelope> e = ParseEnvelope(envelope);
  if (!e) return Refuse(Rejection::kUnreadable, e.error().message);
  if (e->payload_type != kInTotoPayloadType) {
    return Refuse(Rejection::kUnreadable,
                  "the envelope's payloadType is not " + std::string(kInTotoPayloadType));
  }
  // The signature covers PAE(type, payload): the decoded bytes as sent, never re-serialised.
  std::string pae = Pae(e->payload_type, e->payload);
  const PublicKey* signer = nullptr;
  bool named = false;  // a signature names a trusted key's id
  for (const Envelope::Signature& s : e->signatures) {
    for (const PublicKey& k : keys) {
      named = named || s.keyid == k.KeyId();
      if (k.Verify(pae, s.sig)) {
        signer = &k;
        break;
      }
    }
    if (signer != nullptr) break;
  }
  if (signer == nullptr) {
    return named ? Refuse(Rejection::kBadSignature,
                          "the signature does not verify (the payload or signature was altered)")
                 : Refuse(Rejection::kOtherKey, "not signed by a trusted key");
  }
  util::Expected<Statement> st = ParseStatement(e->payload);
  if (!st) return Refuse(Rejection::kUnreadable, st.error().message);
  Checked c;
  c.key = signer->name();
  c.statement = std::move(st).value();
  const Statement& s = c.statement;
  if (std::find(s.subject_digests.begin(), s.subject_digests.end(), expect.digest) ==
      s.subject_digests.end()) {
    c.rejection = Rejection::kOtherSubject;
    c.message = "the statement is about another image (subject " +
                (s.subject_digests.empty() ? std::string("without a sha256 digest")
                                           : s.subject_digests.front().substr(0, 19) + "...") +
                ", not " + expect.digest.substr(0, 19) + "...)";
  } else if (s.predicate_type != kPredicateType) {
    c.rejection = Rejection::kOtherType;
    c.message = "predicate type is not " + std::string(kPredicateType);
  } else if (ScannedOther(s)) {
    // A statement about an index (older imgchecks attested the index of the platform
    // they scanned): the subject is not the manifest the verdict is about.
    c.rejection = Rejection::kOtherSubject;
    c.message = "the statement's subject is not the manifest it scanned (" +
                s.predicate["image"]["manifestDigest"].get<std::string>().substr(0, 19) +
                "...): an index's attestation says nothing of its platforms";
  } else if (s.verdict != "pass" && s.verdict != "fail") {
    c.rejection = Rejection::kUnreadable;
    c.message = "the predicate has no verdict";
  } else if (!expect.policy_identity.empty() && s.policy_identity != expect.policy_identity) {
    c.rejection = Rejection::kOtherPolicy;
    c.message = "judged under policy " + s.policy_identity.substr(0, 23) + ", not " +
                expect.policy_identity.substr(0, 23);
  } else {
    c.rejection = Rejection::kNone;
  }
  return c;
}

}  // namespace imgcheck::attest

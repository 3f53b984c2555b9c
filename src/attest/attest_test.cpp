// Statements, DSSE envelopes, keys and verification, in memory; an independent verifier in
// Python's `cryptography` (testdata/attest/verify.py) accepts what imgcheck signs.
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>

#include "attest/dsse.h"
#include "attest/keys.h"
#include "attest/signature.h"
#include "attest/statement.h"
#include "attest/verify.h"
#include "image/registry_auth.h"
#include "support.h"

namespace imgcheck::attest {
namespace {

using namespace imgcheck::testing;

const std::string kImage = "sha256:" + std::string(64, 'a');
const std::string kOther = "sha256:" + std::string(64, 'b');

PublicKey Public(const KeyPair& k, const std::string& name = "trusted") {
  auto p = PublicKey::FromPem(k.public_pem, name);
  REQUIRE(p.has_value());
  return *p;
}

Signer Private(const KeyPair& k) {
  auto s = Signer::FromPem(k.private_pem, "key");
  REQUIRE(s.has_value());
  return *s;
}

// A scan's report with `n` findings, the first error, the others warnings.
report::Report Report(size_t n) {
  report::Report r;
  r.image.reference = "registry.example/app:1";
  r.image.manifest_digest = kImage;
  for (size_t i = 0; i < n; ++i) {
    rules::Finding f;
    f.rule = i == 0 ? "IC001" : "IC051";
    f.severity = i == 0 ? rules::Severity::kError : rules::Severity::kWarning;
    f.paths = {"/usr/lib/libcudnn.so." + std::to_string(i)};
    f.layer = {2, "sha256:" + std::string(64, 'c'), "COPY x"};
    r.findings.push_back(f);
  }
  return r;
}

scan::Policy TestPolicy(const std::string& fail_on = "error") {
  scan::PolicyArgs args;
  args.fail_on = fail_on;
  return scan::LoadPolicy(args);
}

std::string Statement(const scan::Policy& policy, const std::string& digest = kImage,
                      size_t findings = 1) {
  return StatementJson("registry.example/app", digest, Predicate(Report(findings), policy));
}

TEST_CASE("dsse: the pre-authentication encoding is the spec's", "[attest]") {
  // secure-systems-lab/dsse v1.0.0 protocol.md, "Test vector".
  CHECK(Pae("http://example.com/HelloWorld", "hello world") ==
        "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
  CHECK(Pae("", "") == "DSSEv1 0  0 ");
}

TEST_CASE("attest: a signed statement verifies, here and in an independent verifier", "[attest]") {
  KeyPair key = GenerateKeyPair();
  CHECK(key.private_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
  CHECK(key.public_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
  scan::Policy policy = TestPolicy();
  std::string envelope = SignEnvelope(kInTotoPayloadType, Statement(policy), Private(key));
  auto j = nlohmann::json::parse(envelope);
  CHECK(j["payloadType"] == "application/vnd.in-toto+json");
  CHECK(j["signatures"][0]["keyid"] == Public(key).KeyId());

  Checked c = Verify(envelope, {Public(key)}, {kImage, policy.identity});
  INFO(c.message);
  REQUIRE(c.ok());
  CHECK(c.statement.type == kStatementV1);
  CHECK(c.statement.verdict == "fail");  // one error finding under --fail-on error
  CHECK(c.statement.policy_identity == policy.identity);

  TempDir dir;
  WriteFile(dir / "envelope.json", envelope);
  WriteFile(dir / "key.pub", key.public_pem);
  CommandResult py =
      Run("python3 " + Quote(SourceDir() / "testdata/attest/verify.py") + " envelope " +
          Quote(dir / "envelope.json") + " " + Quote(dir / "key.pub") + " " + kImage);
  INFO(py.output);
  CHECK(py.status == 0);
  CHECK(py.output.find("verified: " + kImage + " verdict fail") != std::string::npos);
}

TEST_CASE("attest: the predicate carries the policy and a bounded list of findings", "[attest]") {
  scan::Policy policy = TestPolicy("none");
  nlohmann::ordered_json p = Predicate(Report(kMaxPredicateFindings + 50), policy);
  CHECK(p["verdict"] == "pass");  // --fail-on none
  CHECK(p["policy"]["identity"] == policy.identity);
  CHECK(p["policy"]["failOn"] == "none");
  CHECK(p["counts"]["error"] == 1);
  CHECK(p["counts"]["warning"] == kMaxPredicateFindings + 49);
  CHECK(p["findings"].size() == kMaxPredicateFindings);
  CHECK(p["findingsOmitted"] == 50);
  CHECK(p["findings"][0]["rule"] == "IC001");
  CHECK(p["findings"][0]["path"] == "/usr/lib/libcudnn.so.0");
  CHECK(p["findings"][0]["layer"]["index"] == 2);
  CHECK(p["rules"]["digest"].get<std::string>().starts_with("sha256:"));
}

// The envelope with its decoded payload changed by `edit`, the signature kept.
std::string EditPayload(const std::string& envelope,
                        const std::function<void(std::string&)>& edit) {
  auto j = nlohmann::ordered_json::parse(envelope);
  std::string payload;
  REQUIRE(image::Base64Decode(j["payload"].get<std::string>(), payload));
  edit(payload);
  j["payload"] = image::Base64Encode(payload);
  return j.dump();
}

TEST_CASE("attest: verify refuses each forgery with its reason", "[attest]") {
  KeyPair key = GenerateKeyPair(), other = GenerateKeyPair();
  scan::Policy policy = TestPolicy();
  std::vector<PublicKey> trusted = {Public(key)};
  Expectation expect{kImage, policy.identity};
  std::string good = SignEnvelope(kInTotoPayloadType, Statement(policy), Private(key));
  REQUIRE(Verify(good, trusted, expect).ok());
  auto reason = [&](const std::string& envelope) {
    Checked c = Verify(envelope, trusted, expect);
    CHECK(c.message.find('\n') == std::string::npos);
    if (!c.ok()) CHECK_FALSE(c.message.empty());
    return c.rejection;
  };

  // One byte of the payload: "fail" becomes "pass".
  CHECK(reason(EditPayload(good, [](std::string& p) {
          size_t at = p.find("\"verdict\":\"fail\"");
          REQUIRE(at != std::string::npos);
          p[at + 11] = 'p';
        })) == Rejection::kBadSignature);
  CHECK(reason(SignEnvelope(kInTotoPayloadType, Statement(policy), Private(other))) ==
        Rejection::kOtherKey);
  CHECK(reason(SignEnvelope(kInTotoPayloadType, Statement(policy, kOther), Private(key))) ==
        Rejection::kOtherSubject);
  CHECK(reason(SignEnvelope(kInTotoPayloadType, Statement(TestPolicy("warning")), Private(key))) ==
        Rejection::kOtherPolicy);
  // An index's statement (subject the index, predicate the platform manifest scanned): read as
  // the index's verdict, it is refused; its subject is not what was scanned.
  Checked of_index =
      Verify(SignEnvelope(kInTotoPayloadType, Statement(policy, kOther), Private(key)), trusted,
             {kOther, policy.identity});
  CHECK(of_index.rejection == Rejection::kOtherSubject);
  CHECK_THAT(of_index.message, Catch::Contains("is not the manifest it scanned"));
  CHECK(reason(SignEnvelope("text/plain", Statement(policy), Private(key))) ==
        Rejection::kUnreadable);
  std::string other_type = Statement(policy);
  other_type.replace(other_type.find(kPredicateType), kPredicateType.size(),
                     "https://slsa.dev/provenance/v1");
  CHECK(reason(SignEnvelope(kInTotoPayloadType, other_type, Private(key))) ==
        Rejection::kOtherType);
  // Truncated, huge, not JSON, no signature.
  CHECK(reason(good.substr(0, good.size() / 2)) == Rejection::kUnreadable);
  CHECK(reason(std::string(kMaxEnvelopeBytes + 1, ' ')) == Rejection::kUnreadable);
  CHECK(reason("\x01\xff") == Rejection::kUnreadable);
  auto unsigned_env = nlohmann::json::parse(good);
  unsigned_env["signatures"] = nlohmann::json::array();
  CHECK(reason(unsigned_env.dump()) == Rejection::kUnreadable);
  // A signature moved onto another statement of the same key: the PAE differs.
  auto moved = nlohmann::json::parse(
      SignEnvelope(kInTotoPayloadType, Statement(policy, kImage, 3), Private(key)));
  moved["signatures"] = nlohmann::json::parse(good)["signatures"];
  CHECK(reason(moved.dump()) == Rejection::kBadSignature);

  // cosign attest writes Statement v0.1: read too.
  std::string v01 = Statement(policy);
  v01.replace(v01.find(kStatementV1), kStatementV1.size(), kStatementV01);
  CHECK(reason(SignEnvelope(kInTotoPayloadType, v01, Private(key))) == Rejection::kNone);
}

TEST_CASE("keys: PKCS#8 and SPKI PEM of P-256 only, cosign's encrypted format refused",
          "[attest]") {
  TempDir dir;
  CommandResult gen = Run("cd " + Quote(dir.path()) +
                          " && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256"
                          " -out ec.key && openssl pkey -in ec.key -pubout -out ec.pub"
                          " && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048"
                          " -out rsa.key && openssl genpkey -algorithm EC"
                          " -pkeyopt ec_paramgen_curve:P-384 -out p384.key 2>&1");
  INFO(gen.output);
  REQUIRE(gen.status == 0);
  Signer s = LoadSigner((dir / "ec.key").string());
  PublicKey p = LoadPublicKey((dir / "ec.pub").string());
  CHECK(s.KeyId() == p.KeyId());
  CHECK(p.Verify("message", s.Sign("message")));
  CHECK_FALSE(p.Verify("massage", s.Sign("message")));
  CHECK_FALSE(p.Verify("message", "not DER"));
  CHECK_THROWS_WITH(LoadSigner((dir / "rsa.key").string()), Catch::Contains("not an ECDSA P-256"));
  CHECK_THROWS_WITH(LoadSigner((dir / "p384.key").string()), Catch::Contains("not an ECDSA P-256"));
  CHECK_THROWS_WITH(LoadSigner((dir / "ec.pub").string()), Catch::Contains("not an unencrypted"));
  CHECK_THROWS_WITH(LoadPublicKey((dir / "ec.key").string()), Catch::Contains("not a PEM public"));
  CHECK_THROWS_WITH(LoadSigner((dir / "missing").string()), Catch::Contains("missing"));
  WriteFile(dir / "cosign.key",
            "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\neyJrZGYiOnt9fQ==\n"
            "-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n");
  CHECK_THROWS_WITH(LoadSigner((dir / "cosign.key").string()),
                    Catch::Contains("OpenSSL does not implement"));
  WriteFile(dir / "huge.key", std::string(1 << 20, 'A'));
  CHECK_THROWS_WITH(LoadSigner((dir / "huge.key").string()), Catch::Contains("not a key file"));
}

TEST_CASE("signature: cosign's simple signing of an artifact, and what is refused", "[attest]") {
  KeyPair key = GenerateKeyPair(), other = GenerateKeyPair();
  std::vector<PublicKey> trusted = {Public(key, "publisher")};
  std::string payload = SimpleSigningPayload("registry.example/rules", kImage);
  // cosign's payload, field for field (sigstore/cosign pkg/cosign/payload).
  CHECK(payload ==
        R"({"critical":{"identity":{"docker-reference":"registry.example/rules"},"image":)"
        R"({"docker-manifest-digest":")" +
            kImage + R"("},"type":"cosign container image signature"},"optional":null})");
  auto sign = [](const KeyPair& k, const std::string& p) {
    return image::Base64Encode(Private(k).Sign(p));
  };
  util::Expected<SignedBy> good = CheckSimpleSigning(payload, sign(key, payload), kImage, trusted);
  REQUIRE(good);
  CHECK(good->key == "publisher");
  CHECK(CheckSignatureRecord(SignatureRecord(*good), kImage, trusted).empty());

  auto refused = [&](std::string_view p, const std::string& sig, const std::string& digest) {
    util::Expected<SignedBy> r = CheckSimpleSigning(p, sig, digest, trusted);
    REQUIRE_FALSE(r);
    return r.error().message;
  };
  // Another key; the payload changed after signing; no signature; one that is not base64.
  CHECK(refused(payload, sign(other, payload), kImage) == "not signed by a trusted key");
  std::string edited = SimpleSigningPayload("registry.example/rules", kOther);
  CHECK(refused(edited, sign(key, payload), kOther) == "not signed by a trusted key");
  CHECK_THAT(refused(payload, "", kImage), Catch::Contains("not base64"));
  CHECK_THAT(refused(payload, "%%%", kImage), Catch::Contains("not base64"));
  // A good signature of another artifact, moved beside this one.
  CHECK_THAT(refused(payload, sign(key, payload), kOther),
             Catch::Contains("the signature is of another manifest"));
  // Signed bytes that are not a simple-signing payload (a DSSE statement, say).
  std::string statement = R"({"_type":"https://in-toto.io/Statement/v1"})";
  CHECK_THAT(refused(statement, sign(key, statement), kImage),
             Catch::Contains("not a cosign simple-signing payload"));
  // The record kept with installed data: checked against the keys trusted now.
  CHECK(CheckSignatureRecord(SignatureRecord(*good), kImage, {Public(other)}) ==
        "not signed by a trusted key");
  CHECK(CheckSignatureRecord(SignatureRecord(*good), kOther, trusted) != "");
  CHECK(CheckSignatureRecord("{", kImage, trusted) == "the signature record is unreadable");
  CHECK(SignatureTag(kImage) == "sha256-" + kImage.substr(7) + ".sig");
}

}  // namespace
}  // namespace imgcheck::attest

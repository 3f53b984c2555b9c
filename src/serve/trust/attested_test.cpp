// serve --trust-key against a real registry (docker-registry): an image decided from its signed
// attestation exactly as its scan would decide it, and never from a forged, replayed or foreign
// attestation, or one of another policy.
#include "serve/trust/attested.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>

#include "attest/attest.h"
#include "attest/bundle.h"
#include "attest/dsse.h"
#include "image/registry_auth.h"
#include "registry_server.h"
#include "serve/front/front.h"
#include "support.h"

namespace imgcheck::serve::trust {
namespace {

using namespace imgcheck::testing;

attest::AttachOptions NoSettle() {
  attest::AttachOptions o;
  o.sleep = [](std::chrono::milliseconds) {};
  return o;
}

struct Fixture {
  Fixture() : reg({}), digests(PushMarkerImages(reg, work.path(), {"1", "2"})) {
    attest::KeyPair k = attest::GenerateKeyPair();
    signer = *attest::Signer::FromPem(k.private_pem, "ci.key");
    options.keys = {*attest::PublicKey::FromPem(k.public_pem, "ci.pub")};
    options.registry = reg.Options();
    policy = scan::LoadPolicy({});
  }
  std::string Pinned(size_t i) const { return reg.host() + "/app@" + digests[i]; }
  // A statement about image `i` with `findings` error findings, under `p`; its predicate says
  // image `scanned` was scanned (`i` unless given).
  std::string Envelope(size_t i, size_t findings, const scan::Policy& p,
                       const attest::Signer* by = nullptr, std::optional<size_t> scanned = {}) {
    report::Report rep;
    rep.image.manifest_digest = digests[scanned.value_or(i)];
    for (size_t n = 0; n < findings; ++n) {
      rules::Finding f;
      f.rule = "IC001";
      f.severity = rules::Severity::kError;
      f.paths = {"/usr/lib/libcudnn.so.8"};
      rep.findings.push_back(f);
    }
    return attest::SignEnvelope(
        attest::kInTotoPayloadType,
        attest::StatementJson(reg.host() + "/app", digests[i], attest::Predicate(rep, p)),
        by != nullptr ? *by : signer);
  }
  void Attach(size_t onto, const std::string& envelope) {
    image::Repository repo(Pinned(onto), reg.Options());
    attest::Attach(repo, digests[onto], envelope, attest::kPredicateType, NoSettle());
  }

  TempDir work;
  Registry reg;
  std::vector<std::string> digests;
  attest::Signer signer;
  AttestationOptions options;
  scan::Policy policy;
};

front::ImageResult Judged(const std::string& digest, std::shared_ptr<const Verdict> v) {
  front::ImageResult r;
  r.use = {"app", "spec.containers[0]"};
  r.digest = digest;
  r.outcome.state = fleet::Outcome::State::kReady;
  r.outcome.verdict = std::move(v);
  return r;
}

TEST_CASE("serve: a valid attestation decides as the scan would",
          "[serve][attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  Fixture f;
  Metrics metrics;
  Attestations a(f.options, metrics);
  a.SetIdentity(f.policy.identity);
  CHECK(a.Find(f.digests[0], f.Pinned(0)) == nullptr);  // nothing attached yet

  f.Attach(0, f.Envelope(0, 1, f.policy));  // one error finding: deny
  f.Attach(1, f.Envelope(1, 0, f.policy));  // nothing: allow
  auto deny = a.Find(f.digests[0], f.Pinned(0));
  auto allow = a.Find(f.digests[1], f.Pinned(1));
  REQUIRE(deny != nullptr);
  REQUIRE(allow != nullptr);
  CHECK(deny->source == "attestation");
  CHECK_FALSE(front::Decide({Judged(f.digests[0], deny)}, {}).allowed);
  CHECK(front::Decide({Judged(f.digests[1], allow)}, {}).allowed);
  // What the shared store keeps reads back as the same verdict.
  auto back = ParseVerdict(deny->report);
  REQUIRE(back.has_value());
  CHECK(back->source == "attestation");
  CHECK(back->Fails({rules::Severity::kError}));
  std::string m = metrics.Render();
  CHECK(m.find("imgcheck_attestation_verdicts_total{verdict=\"fail\"} 1") != std::string::npos);
  CHECK(m.find("imgcheck_attestation_verdicts_total{verdict=\"pass\"} 1") != std::string::npos);

  // Found in about the time a manifest fetch takes: the API check, the .att manifest, one blob.
  std::vector<double> ms;
  for (int i = 0; i < 50; ++i) {
    auto start = std::chrono::steady_clock::now();
    REQUIRE(a.Find(f.digests[1], f.Pinned(1)) != nullptr);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  WARN("Attestations::Find over loopback: median " << ms[25] << " ms, p99 " << ms[49] << " ms");
}

TEST_CASE("serve: never admits from a forged, replayed, foreign or other-policy attestation",
          "[serve][attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  Fixture f;
  Metrics metrics;
  Attestations a(f.options, metrics);
  a.SetIdentity(f.policy.identity);
  // Image 0 fails; image 1 has no attestation of its own.
  std::string failing = f.Envelope(0, 1, f.policy);
  // Forged: image 0's failing statement edited to list no finding, the signature kept.
  auto forged = nlohmann::ordered_json::parse(failing);
  std::string payload;
  REQUIRE(image::Base64Decode(forged["payload"].get<std::string>(), payload));
  size_t at = payload.find("\"verdict\":\"fail\"");
  REQUIRE(at != std::string::npos);
  payload.replace(at, 16, "\"verdict\":\"pass\"");
  forged["payload"] = image::Base64Encode(payload);
  f.Attach(0, forged.dump());
  CHECK(a.Find(f.digests[0], f.Pinned(0)) == nullptr);
  // Replayed: a passing statement about image 1, copied onto image 0.
  f.Attach(0, f.Envelope(1, 0, f.policy));
  CHECK(a.Find(f.digests[0], f.Pinned(0)) == nullptr);
  // Foreign: a passing statement about image 0 by a key not trusted.
  attest::Signer stranger =
      *attest::Signer::FromPem(attest::GenerateKeyPair().private_pem, "stranger");
  f.Attach(0, f.Envelope(0, 0, f.policy, &stranger));
  CHECK(a.Find(f.digests[0], f.Pinned(0)) == nullptr);
  // Bound to another manifest than its subject (an index's statement, as older imgchecks wrote
  // them: the subject the index, image 1 the platform scanned), read for the subject.
  f.Attach(0, f.Envelope(0, 0, f.policy, nullptr, 1));
  CHECK(a.Find(f.digests[0], f.Pinned(0)) == nullptr);
  // Another policy: a pass under --fail-on none.
  scan::PolicyArgs none;
  none.fail_on = "none";
  f.Attach(0, f.Envelope(0, 1, scan::LoadPolicy(none)));
  CHECK(a.Find(f.digests[0], f.Pinned(0)) == nullptr);

  std::string m = metrics.Render();
  INFO(m);
  for (const char* reason : {"bad-signature", "other-subject", "other-key", "other-policy"})
    CHECK(m.find(std::string("imgcheck_attestations_rejected_total{reason=\"") + reason + "\"}") !=
          std::string::npos);
  CHECK(m.find("imgcheck_attestation_verdicts_total{verdict=\"pass\"} 0") != std::string::npos);

  // And the real one still decides: deny.
  f.Attach(0, failing);
  auto v = a.Find(f.digests[0], f.Pinned(0));
  REQUIRE(v != nullptr);
  CHECK_FALSE(front::Decide({Judged(f.digests[0], v)}, {}).allowed);
}

TEST_CASE("serve: a bundle referrer decides as an .att layer does",
          "[serve][attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  Fixture f;
  Metrics metrics;
  Attestations a(f.options, metrics);
  a.SetIdentity(f.policy.identity);
  auto refer = [&f](size_t onto, const std::string& envelope) {
    image::Repository repo(f.Pinned(onto), f.reg.Options());
    auto subject = repo.GetManifest(f.digests[onto], 1 << 20);
    REQUIRE(subject.has_value());
    attest::AttachBundle(repo, *subject, attest::MakeBundle(envelope, f.signer.KeyId()),
                         attest::kPredicateType, NoSettle());
  };
  // Image 0's failing statement as a bundle on image 0 (docker-registry: the referrers tag),
  // and the same copied onto image 1.
  std::string failing = f.Envelope(0, 1, f.policy);
  refer(0, failing);
  refer(1, failing);
  auto deny = a.Find(f.digests[0], f.Pinned(0));
  REQUIRE(deny != nullptr);
  CHECK(deny->source == "attestation");
  CHECK_FALSE(front::Decide({Judged(f.digests[0], deny)}, {}).allowed);
  CHECK(a.Find(f.digests[1], f.Pinned(1)) == nullptr);
  std::string m = metrics.Render();
  INFO(m);
  CHECK(m.find("imgcheck_attestation_verdicts_total{verdict=\"fail\"} 1") != std::string::npos);
  CHECK(m.find("imgcheck_attestations_rejected_total{reason=\"other-subject\"} 1") !=
        std::string::npos);
}

}  // namespace
}  // namespace imgcheck::serve::trust

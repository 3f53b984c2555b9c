// Attestations on a real registry (Debian's docker-registry): cosign's layout, appends that lose
// no concurrent writer's layer, the independent Python verifier (testdata/attest/verify.py), and
// a registry or an attacker serving what should be refused.
#include <atomic>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "attest/attest.h"
#include "attest/dsse.h"
#include "attest/statement.h"
#include "image/registry_auth.h"
#include "registry_server.h"
#include "support.h"
#include "util/sha256.h"

namespace imgcheck::attest {
namespace {

using namespace imgcheck::testing;

AttachOptions NoSettle() {
  AttachOptions o;
  o.sleep = [](std::chrono::milliseconds) {};
  return o;
}

// A registry holding two small images, app:1 and app:2, and a key pair.
struct Fixture {
  Fixture() : reg({}), digests(PushMarkerImages(reg, work.path(), {"1", "2"})) {
    KeyPair pair = GenerateKeyPair();
    WriteFile(work / "key.pub", pair.public_pem);
    signer = *Signer::FromPem(pair.private_pem, "key");
    keys = {*PublicKey::FromPem(pair.public_pem, "key.pub")};
    policy = scan::LoadPolicy({});
  }
  image::Repository Repo() { return image::Repository(reg.host() + "/app:1", reg.Options()); }
  // A signed statement about image `i` (its verdict "pass": no finding).
  std::string Envelope(size_t i, const scan::Policy* under = nullptr) {
    report::Report rep;
    rep.image.manifest_digest = digests[i];
    std::string st = StatementJson(reg.host() + "/app", digests[i],
                                   Predicate(rep, under != nullptr ? *under : policy));
    return SignEnvelope(kInTotoPayloadType, st, signer);
  }
  // The Python verifier over the registry: `count` attestations of image `i`, all accepted.
  CommandResult Python(size_t i, size_t count) {
    return Run("python3 " + Quote(SourceDir() / "testdata/attest/verify.py") + " registry http://" +
               reg.host() + " app " + digests[i] + " " + Quote(work / "key.pub") + " " +
               std::to_string(count));
  }

  TempDir work;
  Registry reg;
  std::vector<std::string> digests;
  Signer signer;
  std::vector<PublicKey> keys;
  scan::Policy policy;
};

TEST_CASE("attach: cosign's layout, appended, accepted by the independent verifier",
          "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  Fixture f;
  image::Repository repo = f.Repo();
  CHECK(AttestationTag(f.digests[0]) == "sha256-" + f.digests[0].substr(7) + ".att");
  Attach(repo, f.digests[0], f.Envelope(0), kPredicateType, NoSettle());
  Attach(repo, f.digests[0], f.Envelope(0), kPredicateType, NoSettle());
  CommandResult py = f.Python(0, 2);
  INFO(py.output);
  CHECK(py.status == 0);

  // The layout as cosign writes it (sigstore/cosign pkg/oci/static NewAttestation with
  // WithLayerMediaType(types.DssePayloadType) and the "predicateType" annotation of
  // cmd/cosign/cli/attest; pkg/oci/remote AttestationTag): checked field by field here.
  auto m = repo.GetManifest(AttestationTag(f.digests[0]), 1 << 20);
  REQUIRE(m.has_value());
  CHECK(m->media_type == "application/vnd.oci.image.manifest.v1+json");
  auto j = nlohmann::json::parse(m->body);
  CHECK(j["schemaVersion"] == 2);
  CHECK(j["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json");
  REQUIRE(j["layers"].size() == 2);
  for (const auto& l : j["layers"]) {
    CHECK(l["mediaType"] == "application/vnd.dsse.envelope.v1+json");
    CHECK(l["annotations"]["predicateType"] == kPredicateType);
    CHECK(l["annotations"]["dev.cosignproject.cosign/signature"] == "");
  }
  Decision d = VerifyDigest(repo, f.digests[0], f.keys, f.policy.identity);
  CHECK(d.accepted.has_value());
  CHECK(d.refused.empty());
  CHECK(d.accepted->statement.verdict == "pass");
  // Nothing attached to the other image.
  Decision none = VerifyDigest(repo, f.digests[1], f.keys, f.policy.identity);
  CHECK_FALSE(none.accepted.has_value());
  CHECK(none.refused.empty());
}

TEST_CASE("attach: concurrent writers lose no layer", "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  Fixture f;
  constexpr int kWriters = 4;
  std::vector<std::string> envelopes;
  envelopes.reserve(kWriters);
  for (int i = 0; i < kWriters; ++i) envelopes.push_back(f.Envelope(0));
  std::atomic<int> failed{0};
  std::vector<std::thread> writers;
  writers.reserve(kWriters);
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&, i] {
      try {
        image::Repository repo(f.reg.host() + "/app:1", f.reg.Options());
        Attach(repo, f.digests[0], envelopes[i], kPredicateType);  // the real settle wait
      } catch (const util::Fatal&) {
        ++failed;
      }
    });
  }
  for (auto& t : writers) t.join();
  CHECK(failed == 0);
  CommandResult py = f.Python(0, kWriters);
  INFO(py.output);
  CHECK(py.status == 0);
}

// Appends `layer` (`copies` times) to image `digest`'s .att manifest as is.
void AppendRaw(image::Repository& repo, const std::string& digest, const std::string& layer,
               int copies = 1) {
  std::string tag = AttestationTag(digest);
  auto old = repo.GetManifest(tag, 64 << 20);
  nlohmann::json m =
      old ? nlohmann::json::parse(old->body)
          : nlohmann::json{{"schemaVersion", 2},
                           {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                           {"layers", nlohmann::json::array()}};
  std::string config = "{}";
  m["config"] = {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                 {"size", config.size()},
                 {"digest", repo.PutBlob(config)}};
  nlohmann::json d = {{"mediaType", kDsseMediaType},
                      {"size", layer.size()},
                      {"digest", repo.PutBlob(layer)},
                      {"annotations", {{"predicateType", kPredicateType}}}};
  for (int i = 0; i < copies; ++i) m["layers"].push_back(d);
  repo.PutManifest(tag, m.dump(), "application/vnd.oci.image.manifest.v1+json");
}

TEST_CASE("verify: a hostile registry's attestations are refused, each with its reason",
          "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  Fixture f;
  image::Repository repo = f.Repo();
  auto refused_as = [&](Rejection want) {
    Decision d = VerifyDigest(repo, f.digests[1], f.keys, f.policy.identity);
    CHECK_FALSE(d.accepted.has_value());
    REQUIRE_FALSE(d.refused.empty());
    INFO(d.refused.back().message);
    CHECK(d.refused.back().message.find('\n') == std::string::npos);
    CHECK(d.refused.back().reason == want);
    return d.refused.back().message;
  };
  // An attestation of app:1 copied onto app:2.
  AppendRaw(repo, f.digests[1], f.Envelope(0));
  refused_as(Rejection::kOtherSubject);
  // A statement for another policy identity.
  scan::PolicyArgs warning;
  warning.fail_on = "warning";
  scan::Policy other = scan::LoadPolicy(warning);
  AppendRaw(repo, f.digests[1], f.Envelope(1, &other));
  refused_as(Rejection::kOtherPolicy);
  // Truncated, and one byte of the payload edited.
  std::string good = f.Envelope(1);
  AppendRaw(repo, f.digests[1], good.substr(0, good.size() - 20));
  refused_as(Rejection::kUnreadable);
  auto edited = nlohmann::ordered_json::parse(good);
  std::string payload;
  REQUIRE(image::Base64Decode(edited["payload"].get<std::string>(), payload));
  payload[payload.find("\"pass\"") + 1] = 'b';
  edited["payload"] = image::Base64Encode(payload);
  AppendRaw(repo, f.digests[1], edited.dump());
  refused_as(Rejection::kBadSignature);
  // Signed by another key.
  KeyPair stranger = GenerateKeyPair();
  AppendRaw(repo, f.digests[1],
            SignEnvelope(kInTotoPayloadType,
                         StatementJson("x", f.digests[1], Predicate(report::Report{}, f.policy)),
                         *Signer::FromPem(stranger.private_pem, "stranger")));
  refused_as(Rejection::kOtherKey);
  // A huge envelope: refused from its descriptor, before a byte is read.
  AppendRaw(repo, f.digests[1], std::string(kMaxEnvelopeBytes + 1, ' '));
  CHECK(refused_as(Rejection::kUnreadable).find("more than") != std::string::npos);
  // A registry serving other bytes than the layer's digest: the blob file rewritten in storage.
  std::string victim = f.Envelope(1);
  AppendRaw(repo, f.digests[1], victim);
  std::string forged = victim;
  forged[forged.size() / 2] ^= 1;
  WriteFile(f.reg.BlobFile(util::Sha256Digest(victim)), forged);
  CHECK(refused_as(Rejection::kUnreadable).find("another digest") != std::string::npos);

  // A .att manifest of 10,000 layers: refused whole, in one line.
  AppendRaw(repo, f.digests[0], f.Envelope(0), 10000);
  try {
    VerifyDigest(repo, f.digests[0], f.keys, f.policy.identity);
    FAIL("10,000 layers were read");
  } catch (const util::Fatal& e) {
    CHECK(std::string(e.what()).find("10000 layers, more than the 256 allowed") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace imgcheck::attest

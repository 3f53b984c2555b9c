// Attestations on a real registry (Debian's docker-registry): cosign's layout, appends that lose
// no concurrent writer's layer, the independent Python verifier (testdata/attest/verify.py), and
// a registry or an attacker serving what should be refused.
#include <atomic>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "attest/attest.h"
#include "attest/bundle.h"
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

// verify's decisions: image 0 passes by its attestations, image 1 has none at all.
void AcceptedForFirstOnly(Fixture& f, image::Repository& repo) {
  Decision d = VerifyDigest(repo, f.digests[0], f.keys, f.policy.identity);
  REQUIRE(d.accepted.has_value());
  CHECK(d.refused.empty());
  CHECK(d.accepted->statement.verdict == "pass");
  Decision none = VerifyDigest(repo, f.digests[1], f.keys, f.policy.identity);
  CHECK_FALSE(none.accepted.has_value());
  CHECK(none.refused.empty());
}

// Image 1's newest attestation is refused for `want`, in one line, and none accepted; returns
// the refusal's message.
std::string NewestRefusedAs(Fixture& f, image::Repository& repo, Rejection want) {
  Decision d = VerifyDigest(repo, f.digests[1], f.keys, f.policy.identity);
  CHECK_FALSE(d.accepted.has_value());
  REQUIRE_FALSE(d.refused.empty());
  INFO(d.refused.back().message);
  CHECK(d.refused.back().message.find('\n') == std::string::npos);
  CHECK(d.refused.back().reason == want);
  return d.refused.back().message;
}

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
  AcceptedForFirstOnly(f, repo);
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
  auto refused_as = [&](Rejection want) { return NewestRefusedAs(f, repo, want); };
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

// The manifest image `i` of the fixture's registry names (a referrer's subject).
image::Repository::Manifest SubjectOf(Fixture& f, image::Repository& repo, size_t i) {
  auto m = repo.GetManifest(f.digests[i], 1 << 20);
  REQUIRE(m.has_value());
  return *m;
}

// The independent verifier over the bundle referrers of image `i`: `count`, all accepted.
CommandResult PythonBundles(Fixture& f, size_t i, size_t count) {
  return Run("python3 " + Quote(SourceDir() / "testdata/attest/verify.py") + " bundle http://" +
             f.reg.host() + " app " + f.digests[i] + " " + Quote(f.work / "key.pub") + " " +
             std::to_string(count));
}

TEST_CASE("bundle: cosign's referrer layout at the referrers tag accepted by the verifiers",
          "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  Fixture f;
  image::Repository repo = f.Repo();
  image::Repository::Manifest subject = SubjectOf(f, repo, 0);
  CHECK(ReferrersTag(f.digests[0]) == "sha256-" + f.digests[0].substr(7));
  std::string bundle = MakeBundle(f.Envelope(0), f.signer.KeyId());
  // docker-registry 2.8 has no referrers API: no OCI-Subject, so the tag schema's index.
  Referred first = AttachBundle(repo, subject, bundle, kPredicateType, NoSettle());
  CHECK(first.tag_index);
  Referred second = AttachBundle(repo, subject, MakeBundle(f.Envelope(0), f.signer.KeyId()),
                                 kPredicateType, NoSettle());
  CHECK(second.manifest != first.manifest);
  CommandResult py = PythonBundles(f, 0, 2);
  INFO(py.output);
  CHECK(py.status == 0);
  CHECK_THAT(py.output, Catch::Contains("listed at the referrers tag"));

  // Checked against sigstore/cosign pkg/oci/remote/write.go at d6d86c22 (2026-07-24):
  // WriteAttestationNewBundleFormat's annotations and WriteReferrer's manifest, as Go's
  // encoding/json writes go-containerregistry's v1.Manifest (field order, sorted map keys).
  auto m = repo.GetManifest(first.manifest, 1 << 20);
  REQUIRE(m.has_value());
  CHECK(m->media_type == "application/vnd.oci.image.manifest.v1+json");
  const std::string empty =
      "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
  CHECK(util::Sha256Digest("{}") == empty);
  CHECK(m->body.starts_with(
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
      R"("config":{"mediaType":"application/vnd.oci.empty.v1+json","size":2,"digest":")" +
      empty +
      R"(","artifactType":"application/vnd.dev.sigstore.bundle.v0.3+json"},)"
      R"("layers":[{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","size":)" +
      std::to_string(bundle.size()) + R"(,"digest":")" + util::Sha256Digest(bundle) +
      R"("}],"annotations":{"dev.sigstore.bundle.content":"dsse-envelope",)"
      R"("dev.sigstore.bundle.predicateType":")" +
      std::string(kPredicateType) + R"(","org.opencontainers.image.created":")"));
  CHECK(m->body.ends_with(R"("},"subject":{"mediaType":")" + subject.media_type + R"(","size":)" +
                          std::to_string(subject.body.size()) + R"(,"digest":")" + f.digests[0] +
                          R"("},"artifactType":"application/vnd.dev.sigstore.bundle.v0.3+json"})"));
  // The bundle (sigstore/protobuf-specs protos/sigstore_bundle.proto at 104df670, camelCase):
  // the hint cosign's key pairs give (internal/key/svkeypair.go), no log entry, the envelope.
  auto b = nlohmann::json::parse(bundle);
  CHECK(b["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json");
  std::string hash;
  REQUIRE(
      image::Base64Decode(b["verificationMaterial"]["publicKey"]["hint"].get<std::string>(), hash));
  CHECK(hash.size() == 32);
  CHECK(b["verificationMaterial"]["tlogEntries"] == nlohmann::json::array());
  CHECK(b["dsseEnvelope"]["payloadType"] == "application/vnd.in-toto+json");
  // The tag schema's index: both referrers, with their artifactType and annotations.
  auto index = repo.GetManifest(ReferrersTag(f.digests[0]), 1 << 20);
  REQUIRE(index.has_value());
  CHECK(index->media_type == "application/vnd.oci.image.index.v1+json");
  auto list = nlohmann::json::parse(index->body)["manifests"];
  REQUIRE(list.size() == 2);
  CHECK(list[0]["digest"] == first.manifest);
  CHECK(list[1]["digest"] == second.manifest);
  CHECK(list[1]["artifactType"] == "application/vnd.dev.sigstore.bundle.v0.3+json");
  CHECK(list[1]["annotations"]["dev.sigstore.bundle.predicateType"] == kPredicateType);

  AcceptedForFirstOnly(f, repo);
}

TEST_CASE("bundle: two concurrent writers to the referrers tag both survive",
          "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  Fixture f;
  image::Repository::Manifest subject = [&] {
    image::Repository repo = f.Repo();
    return SubjectOf(f, repo, 0);
  }();
  std::vector<std::string> bundles = {MakeBundle(f.Envelope(0), f.signer.KeyId()),
                                      MakeBundle(f.Envelope(0), f.signer.KeyId())};
  std::atomic<int> failed{0};
  std::vector<std::thread> writers;
  writers.reserve(bundles.size());
  for (const std::string& bundle : bundles) {
    writers.emplace_back([&f, &subject, &failed, &bundle] {
      try {
        image::Repository repo(f.reg.host() + "/app:1", f.reg.Options());
        AttachBundle(repo, subject, bundle, kPredicateType);  // the real settle wait
      } catch (const util::Fatal&) {
        ++failed;
      }
    });
  }
  for (auto& t : writers) t.join();
  CHECK(failed == 0);
  CommandResult py = PythonBundles(f, 0, bundles.size());
  INFO(py.output);
  CHECK(py.status == 0);
}

TEST_CASE("verify: hostile bundle referrers are refused each with its reason",
          "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  Fixture f;
  image::Repository repo = f.Repo();
  image::Repository::Manifest subject = SubjectOf(f, repo, 1);
  auto refer = [&](const std::string& bundle) {
    AttachBundle(repo, subject, bundle, kPredicateType, NoSettle());
  };
  auto bundle_of = [&](const std::string& envelope) {
    return MakeBundle(envelope, f.signer.KeyId());
  };
  auto refused_as = [&](Rejection want) { return NewestRefusedAs(f, repo, want); };
  // app:1's attestation copied onto app:2 (the referrer's subject is app:2, the statement's not).
  refer(bundle_of(f.Envelope(0)));
  refused_as(Rejection::kOtherSubject);
  // One byte of the payload edited inside the bundle.
  auto edited = nlohmann::ordered_json::parse(bundle_of(f.Envelope(1)));
  std::string payload;
  REQUIRE(image::Base64Decode(edited["dsseEnvelope"]["payload"].get<std::string>(), payload));
  payload[payload.find("\"pass\"") + 1] = 'b';
  edited["dsseEnvelope"]["payload"] = image::Base64Encode(payload);
  refer(edited.dump());
  refused_as(Rejection::kBadSignature);
  // Signed by another key; judged under another policy.
  KeyPair stranger = GenerateKeyPair();
  Signer other_signer = *Signer::FromPem(stranger.private_pem, "stranger");
  refer(MakeBundle(
      SignEnvelope(kInTotoPayloadType,
                   StatementJson("x", f.digests[1], Predicate(report::Report{}, f.policy)),
                   other_signer),
      other_signer.KeyId()));
  refused_as(Rejection::kOtherKey);
  scan::PolicyArgs warning;
  warning.fail_on = "warning";
  scan::Policy other = scan::LoadPolicy(warning);
  refer(bundle_of(f.Envelope(1, &other)));
  refused_as(Rejection::kOtherPolicy);
  // Not JSON, another media type, no envelope, huge (refused from its descriptor).
  std::string good = bundle_of(f.Envelope(1));
  refer(good.substr(0, good.size() - 20));
  CHECK_THAT(refused_as(Rejection::kUnreadable), Catch::Contains("malformed JSON"));
  auto v02 = nlohmann::ordered_json::parse(good);
  v02["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=0.2";
  refer(v02.dump());
  CHECK_THAT(refused_as(Rejection::kUnreadable), Catch::Contains("mediaType is not"));
  refer(R"({"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"})");
  CHECK_THAT(refused_as(Rejection::kUnreadable), Catch::Contains("no dsseEnvelope"));
  refer(std::string(kMaxBundleBytes + 1, ' '));
  CHECK_THAT(refused_as(Rejection::kUnreadable), Catch::Contains("more than"));
  // A registry serving other bytes than the bundle layer's digest.
  std::string victim = bundle_of(f.Envelope(1));
  refer(victim);
  std::string forged = victim;
  forged[forged.size() / 2] ^= 1;
  WriteFile(f.reg.BlobFile(util::Sha256Digest(victim)), forged);
  CHECK_THAT(refused_as(Rejection::kUnreadable), Catch::Contains("another digest"));

  // A referrers index of 10,000 entries (one manifest the registry has, which it checks, listed
  // again and again): refused whole, in one line.
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (int i = 0; i < 10000; ++i) {
    entries.push_back({{"mediaType", subject.media_type},
                       {"size", subject.body.size()},
                       {"digest", subject.digest},
                       {"artifactType", kBundleMediaType}});
  }
  nlohmann::ordered_json index = {{"schemaVersion", 2},
                                  {"mediaType", "application/vnd.oci.image.index.v1+json"},
                                  {"manifests", std::move(entries)}};
  repo.PutManifest(ReferrersTag(f.digests[0]), index.dump(),
                   "application/vnd.oci.image.index.v1+json");
  try {
    VerifyDigest(repo, f.digests[0], f.keys, f.policy.identity);
    FAIL("10,000 referrers were read");
  } catch (const util::Fatal& e) {
    std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.find("10000 manifests, more than the 256 allowed") != std::string::npos);
  }
  // The same flood beside a valid .att layer does not hide it: accepted, the list not read.
  Attach(repo, f.digests[0], f.Envelope(0), kPredicateType, NoSettle());
  Decision d = VerifyDigest(repo, f.digests[0], f.keys, f.policy.identity);
  CHECK(d.accepted.has_value());
  CHECK(d.refused.empty());
}

}  // namespace
}  // namespace imgcheck::attest

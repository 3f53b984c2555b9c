#include "attest/attest.h"

#include <nlohmann/json.hpp>

#include "attest/dsse.h"
#include "attest/statement.h"
#include "image/registry_reference.h"
#include "image/transports.h"
#include "util/error.h"

namespace imgcheck::attest {
namespace {

constexpr uint64_t kMaxImageManifest = uint64_t{4} << 20;

// The registry reference of `reference` ("docker://x" or a bare registry name).
image::Reference RegistryReference(const std::string& reference, const std::string& why) {
  auto [transport, rest] = image::SplitReference(reference);
  if (transport == nullptr || transport->name != "docker")
    throw util::Fatal(why + " needs a registry image, not " + reference);
  util::Expected<image::Reference> ref = image::ParseReference(rest);
  if (!ref) throw util::Fatal(ref.error().message);
  return std::move(ref).value();
}

// The manifest `ref` names now.
image::Repository::Manifest Resolve(image::Repository& repo, const image::Reference& ref) {
  auto m = repo.GetManifest(ref.ManifestRef(), kMaxImageManifest);
  if (!m) throw util::Fatal("manifest " + ref.ManifestRef() + " not found in " + repo.Name());
  return std::move(*m);
}

// Whether index or manifest `m` is, or lists, manifest `digest`.
bool Covers(const image::Repository::Manifest& m, const std::string& digest) {
  if (m.digest == digest) return true;
  auto j = nlohmann::json::parse(m.body, nullptr, false);
  auto list = j.is_object() ? j.find("manifests") : j.end();
  if (!j.is_object() || list == j.end() || !list->is_array()) return false;
  for (const auto& d : *list)
    if (d.is_object() && d.contains("digest") && d["digest"] == digest) return true;
  return false;
}

}  // namespace

Attested AttestScan(const std::string& reference, const report::Report& report,
                    const scan::Policy& policy, const Signer& signer,
                    const image::RegistryOptions& options, Layout layout,
                    const AttachOptions& attach) {
  image::Reference ref = RegistryReference(reference, "--attest");
  image::Repository repo(ref.String(), options);
  image::Repository::Manifest root = Resolve(repo, ref);
  if (!Covers(root, report.image.manifest_digest)) {
    throw util::Fatal(ref.String() + " names " + root.digest + " now, not the " +
                      report.image.manifest_digest + " scanned (the tag moved); not attesting");
  }
  std::string statement = StatementJson(repo.Name(), root.digest, Predicate(report, policy));
  std::string envelope = SignEnvelope(kInTotoPayloadType, statement, signer);
  Attested a;
  a.digest = root.digest;
  a.repository = repo.Name();
  if (layout == Layout::kAtt) {
    a.manifest = Attach(repo, root.digest, envelope, kPredicateType, attach);
    a.where = repo.Name() + ":" + AttestationTag(root.digest);
    return a;
  }
  Referred r =
      AttachBundle(repo, root, MakeBundle(envelope, signer.KeyId()), kPredicateType, attach);
  a.manifest = r.manifest;
  a.where = repo.Name() + "@" + r.manifest +
            (r.tag_index ? " (listed at tag " : " (a referrer of ") +
            (r.tag_index ? ReferrersTag(root.digest) : root.digest) + ")";
  return a;
}

Decision VerifyDigest(image::Repository& repo, const std::string& digest,
                      const std::vector<PublicKey>& keys, const std::string& policy_identity) {
  Decision d;
  d.digest = digest;
  auto consider = [&](const std::vector<Fetched>& fetched) {
    for (const Fetched& f : fetched) {
      if (!f.error.empty()) {
        d.refused.push_back({f.layer_digest, Rejection::kUnreadable, f.error});
        continue;
      }
      Checked c = Verify(f.envelope, keys, {digest, policy_identity});
      if (!c.ok()) {
        d.refused.push_back({f.layer_digest, c.rejection, c.message});
        continue;
      }
      d.accepted = std::move(c);  // later layers are newer
    }
  };
  // The .att layers first (cosign's default layout), bundle referrers only when none verifies:
  // one policy identity gives one verdict, so either decides, and serve asks the registry for
  // the referrers (two requests where it has no API) only then. A referrers list that cannot
  // be read thus never hides a valid .att attestation.
  consider(FetchAttestations(repo, digest));
  if (!d.accepted) consider(FetchBundles(repo, digest));
  return d;
}

Decision VerifyImage(const std::string& reference, const std::vector<PublicKey>& keys,
                     const std::string& policy_identity, const image::RegistryOptions& options) {
  image::Reference ref = RegistryReference(reference, "verify");
  image::Repository repo(ref.String(), options);
  std::string digest = ref.digest.empty() ? Resolve(repo, ref).digest : ref.digest;
  return VerifyDigest(repo, digest, keys, policy_identity);
}

}  // namespace imgcheck::attest

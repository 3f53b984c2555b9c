#include "attest/attest.h"

#include <nlohmann/json.hpp>

#include "attest/dsse.h"
#include "attest/statement.h"
#include "image/manifest.h"
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

// The manifest `tag_or_digest` names now.
image::Repository::Manifest Resolve(image::Repository& repo, const std::string& tag_or_digest) {
  auto m = repo.GetManifest(tag_or_digest, kMaxImageManifest);
  if (!m) throw util::Fatal("manifest " + tag_or_digest + " not found in " + repo.Name());
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
  image::Repository::Manifest root = Resolve(repo, ref.ManifestRef());
  const std::string& scanned = report.image.manifest_digest;
  if (!Covers(root, scanned)) {
    throw util::Fatal(ref.String() + " names " + root.digest + " now, not the " + scanned +
                      " scanned (the tag moved); not attesting");
  }
  // The subject is the manifest scanned: a node pulls that one for its platform, and an index's
  // other platforms were not judged.
  image::Repository::Manifest subject = root.digest == scanned ? root : Resolve(repo, scanned);
  nlohmann::ordered_json predicate = Predicate(report, policy);
  predicate["image"]["index"] = root.digest == scanned ? "" : root.digest;
  std::string statement = StatementJson(repo.Name(), scanned, predicate);
  std::string envelope = SignEnvelope(kInTotoPayloadType, statement, signer);
  Attested a;
  a.digest = scanned;
  a.index = root.digest == scanned ? "" : root.digest;
  a.repository = repo.Name();
  if (layout == Layout::kAtt) {
    a.manifest = Attach(repo, scanned, envelope, kPredicateType, attach);
    a.where = repo.Name() + ":" + AttestationTag(scanned);
    return a;
  }
  Referred r =
      AttachBundle(repo, subject, MakeBundle(envelope, signer.KeyId()), kPredicateType, attach);
  a.manifest = r.manifest;
  a.where = repo.Name() + "@" + r.manifest +
            (r.tag_index ? " (listed at tag " : " (a referrer of ") +
            (r.tag_index ? ReferrersTag(scanned) : scanned) + ")";
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

std::vector<PlatformImage> ImagesOf(const image::Repository::Manifest& root) {
  std::string what = "manifest " + root.digest;
  nlohmann::json doc = image::ParseJson(root.body, kMaxImageManifest, what);
  if (image::KindOf(root.media_type, doc, what) == image::DocumentKind::kManifest)
    return {{"", root.digest}};
  std::vector<PlatformImage> out;
  for (const image::PlatformEntry& e : image::ParseIndex(doc, what))
    if (!e.os.empty() && e.os != "unknown") out.push_back({e.Name(), e.descriptor.digest});
  return out;
}

std::vector<PlatformImage> ImagesOf(const std::string& reference,
                                    const image::RegistryOptions& options) {
  image::Reference ref = RegistryReference(reference, "--platform all");
  image::Repository repo(ref.String(), options);
  return ImagesOf(Resolve(repo, ref.ManifestRef()));
}

ImageDecision VerifyImage(const std::string& reference, const std::string& platform,
                          const std::vector<PublicKey>& keys, const std::string& policy_identity,
                          const image::RegistryOptions& options) {
  image::Reference ref = RegistryReference(reference, "verify");
  image::Repository repo(ref.String(), options);
  image::Repository::Manifest root = Resolve(repo, ref.ManifestRef());
  ImageDecision out;
  out.root = root.digest;
  std::vector<PlatformImage> images = ImagesOf(root);
  out.index = images.size() != 1 || !images[0].platform.empty();
  if (out.index && platform != "all") {
    std::string what = ref.String() + " (index " + root.digest + ")";
    std::vector<image::PlatformEntry> entries =
        image::ParseIndex(image::ParseJson(root.body, kMaxImageManifest, what), what);
    const image::PlatformEntry& e = image::SelectPlatform(entries, platform, what);
    images = {{e.Name(), e.descriptor.digest}};
  }
  if (images.empty()) throw util::Fatal(ref.String() + " is an index without a platform image");
  for (const PlatformImage& i : images)
    out.images.push_back({i.platform, VerifyDigest(repo, i.digest, keys, policy_identity)});
  return out;
}

}  // namespace imgcheck::attest

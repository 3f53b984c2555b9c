#include "attest/bundle.h"

#include <nlohmann/json.hpp>

#include "image/manifest.h"
#include "image/registry_auth.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/sha256.h"

namespace imgcheck::attest {
namespace {

using image::media::kOciIndex;
using image::media::kOciManifest;

// The bytes of lower-case hex `hex` (a KeyId).
std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// One referrer of the list: its manifest, its bundle layer, the envelope in the bundle.
Fetched FetchBundle(image::Repository& repo, const std::string& manifest_digest) {
  Fetched f;
  f.layer_digest = manifest_digest;
  try {
    auto m = repo.GetManifest(manifest_digest, kMaxAttestationManifest);
    if (!m) {
      f.error = "the listed referrer " + manifest_digest + " is not in the registry";
      return f;
    }
    std::string what = "the referrer " + repo.Name() + "@" + manifest_digest;
    for (const auto& l : ListOf(*m, "layers", what)) {
      if (!l.contains("mediaType") || l["mediaType"] != kBundleMediaType) continue;
      f = FetchLayer(repo, l, kMaxBundleBytes, "bundle");
      if (!f.error.empty()) return f;
      util::Expected<std::string> envelope = BundleEnvelope(f.envelope);
      f.envelope.clear();
      if (!envelope) {
        f.error = envelope.error().message;
      } else {
        f.envelope = std::move(envelope).value();
      }
      return f;
    }
    f.error = what + " has no layer of " + std::string(kBundleMediaType);
  } catch (const util::Fatal& e) {
    f.error = e.what();
  }
  return f;
}

}  // namespace

std::string MakeBundle(std::string_view envelope, const std::string& key_id) {
  nlohmann::ordered_json b;
  b["mediaType"] = kBundleMediaType;
  // cosign (verify_bundle.go and svkeypair.go): hint = base64(SHA-256(DER SPKI)); no log entry.
  b["verificationMaterial"] = {{"publicKey", {{"hint", image::Base64Encode(FromHex(key_id))}}},
                               {"tlogEntries", nlohmann::ordered_json::array()}};
  b["dsseEnvelope"] = nlohmann::ordered_json::parse(envelope);
  return b.dump();
}

util::Expected<std::string> BundleEnvelope(std::string_view bundle) {
  nlohmann::json j;
  try {
    j = image::ParseJson(bundle, kMaxBundleBytes, "the bundle");
  } catch (const util::Fatal& e) {
    return util::MakeError(e.what());
  }
  auto type = j.find("mediaType");
  if (type == j.end() || !type->is_string() ||
      type->get_ref<const std::string&>() != kBundleMediaType)
    return util::MakeError("the bundle's mediaType is not " + std::string(kBundleMediaType));
  auto envelope = j.find("dsseEnvelope");
  if (envelope == j.end() || !envelope->is_object())
    return util::MakeError("the bundle holds no dsseEnvelope");
  // The signature covers the decoded payload, so the envelope re-serialised verifies as sent.
  return envelope->dump();
}

Referred AttachBundle(image::Repository& repo, const image::Repository::Manifest& subject,
                      const std::string& bundle, std::string_view predicate_type,
                      const AttachOptions& options) {
  if (!util::IsSha256Digest(subject.digest))
    throw util::Fatal("cannot attest digest '" + subject.digest + "'");
  // WriteAttestationNewBundleFormat's annotations, in the order Go writes a map (sorted keys).
  nlohmann::ordered_json annotations = {
      {std::string(kBundleContentAnnotation), "dsse-envelope"},
      {std::string(kBundlePredicateTypeAnnotation), predicate_type},
      {std::string(kCreatedAnnotation), util::UtcNow("%Y-%m-%dT%H:%M:%SZ")}};
  // WriteReferrer's manifest, fields in go-containerregistry's v1.Manifest order; cosign also
  // sets the config descriptor's artifactType.
  nlohmann::ordered_json m;
  m["schemaVersion"] = 2;
  m["mediaType"] = kOciManifest;
  m["config"] = {{"mediaType", kOciEmptyMediaType},
                 {"size", kOciEmptyJson.size()},
                 {"digest", repo.PutBlob(std::string(kOciEmptyJson))},
                 {"artifactType", kBundleMediaType}};
  m["layers"] = nlohmann::ordered_json::array({{{"mediaType", kBundleMediaType},
                                                {"size", bundle.size()},
                                                {"digest", repo.PutBlob(bundle)}}});
  m["annotations"] = annotations;
  m["subject"] = {
      {"mediaType", subject.media_type}, {"size", subject.body.size()}, {"digest", subject.digest}};
  m["artifactType"] = kBundleMediaType;
  std::string body = m.dump();
  Referred r;
  r.manifest = util::Sha256Digest(body);
  if (repo.PutReferrer(body, kOciManifest)) return r;
  // No OCI-Subject: the referrers tag schema, its descriptor as the referrers API would list it.
  r.tag_index = true;
  nlohmann::ordered_json mine = {{"mediaType", kOciManifest},
                                 {"size", body.size()},
                                 {"digest", r.manifest},
                                 {"annotations", std::move(annotations)},
                                 {"artifactType", kBundleMediaType}};
  auto make = [](nlohmann::ordered_json entries) {
    nlohmann::ordered_json index;
    index["schemaVersion"] = 2;
    index["mediaType"] = kOciIndex;
    index["manifests"] = std::move(entries);
    return std::pair<std::string, std::string_view>(index.dump(), kOciIndex);
  };
  AppendUnderTag(repo, ReferrersTag(subject.digest), "manifests", mine, make, options);
  return r;
}

std::vector<Fetched> FetchBundles(image::Repository& repo, const std::string& digest) {
  if (!util::IsSha256Digest(digest)) throw util::Fatal("bad image digest '" + digest + "'");
  nlohmann::ordered_json entries;
  if (auto body = repo.GetReferrers(digest, kBundleMediaType, kMaxAttestationManifest)) {
    image::Repository::Manifest index{std::string(kOciIndex), "", std::move(*body)};
    entries = ListOf(index, "manifests", "the referrers of " + repo.Name() + "@" + digest);
  } else if (auto tagged = repo.GetManifest(ReferrersTag(digest), kMaxAttestationManifest)) {
    entries =
        ListOf(*tagged, "manifests", "the referrers " + repo.Name() + ":" + ReferrersTag(digest));
  } else {
    return {};
  }
  std::vector<Fetched> out;
  for (const auto& e : entries) {
    // The statement's signed subject, not this list, decides which image it is about (Verify).
    auto type = e.find("artifactType");
    if (type == e.end() || *type != kBundleMediaType) continue;
    out.push_back(FetchBundle(repo, e["digest"].get<std::string>()));
  }
  return out;
}

}  // namespace imgcheck::attest

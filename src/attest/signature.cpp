#include "attest/signature.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attest/attach.h"
#include "image/artifact.h"
#include "image/manifest.h"
#include "image/registry_auth.h"
#include "image/registry_reference.h"
#include "util/sha256.h"

namespace imgcheck::attest {
namespace {

constexpr image::ArtifactTypes kSignatureTypes{"", image::media::kOciConfig,
                                               kSimpleSigningMediaType};
constexpr uint64_t kMaxPayload = 64 << 10;

// The reference of tag `tag` in the repository (or layout) of `reference`.
std::string Sibling(const std::string& reference, const std::string& tag) {
  std::string_view r = reference;
  if (r.starts_with("oci:")) {
    std::string_view rest = r.substr(4);
    return "oci:" + std::string(rest.substr(0, rest.find(':'))) + ":" + tag;
  }
  if (r.starts_with("docker://")) r.remove_prefix(9);
  util::Expected<image::Reference> ref = image::ParseReference(r);
  if (!ref) throw util::Fatal(ref.error().message);
  return ref->domain + "/" + ref->path + ":" + tag;
}

// "host/rules" of a registry reference; the layout's path for oci:.
std::string Repository(const std::string& reference) {
  std::string sibling = Sibling(reference, "x");
  return sibling.substr(0, sibling.size() - 2);
}

// The config of a signature manifest, as cosign writes it (go-containerregistry's empty image
// with the payload as its one layer).
std::string SignatureConfig(const std::string& payload_digest) {
  nlohmann::ordered_json c;
  c["architecture"] = "";
  c["created"] = "0001-01-01T00:00:00Z";
  c["history"] = nlohmann::ordered_json::array({{{"created", "0001-01-01T00:00:00Z"}}});
  c["os"] = "";
  c["rootfs"] = {{"type", "layers"}, {"diff_ids", {payload_digest}}};
  c["config"] = nlohmann::ordered_json::object();
  return c.dump();
}

}  // namespace

std::string SignatureTag(const std::string& digest) { return ReferrersTag(digest) + ".sig"; }

std::string SimpleSigningPayload(const std::string& repository, const std::string& digest) {
  nlohmann::ordered_json p;
  p["critical"] = {{"identity", {{"docker-reference", repository}}},
                   {"image", {{"docker-manifest-digest", digest}}},
                   {"type", kSimpleSigningType}};
  p["optional"] = nullptr;
  return p.dump();
}

util::Expected<SignedBy> CheckSimpleSigning(std::string_view payload, std::string_view signature,
                                            const std::string& digest,
                                            const std::vector<PublicKey>& keys) {
  std::string der;
  if (signature.empty() || !image::Base64Decode(signature, der))
    return util::MakeError("the signature annotation is not base64");
  const PublicKey* by = nullptr;
  for (const PublicKey& k : keys) {
    if (k.Verify(payload, der)) {
      by = &k;
      break;
    }
  }
  if (by == nullptr) return util::MakeError("not signed by a trusted key");
  // Only now is the payload read: its bytes are the publisher's.
  nlohmann::json p = nlohmann::json::parse(payload, nullptr, false);
  const nlohmann::json* critical =
      p.is_object() && p.contains("critical") && p["critical"].is_object() ? &p["critical"]
                                                                           : nullptr;
  auto text = [&](const char* object, const char* key) {
    if (critical == nullptr || !critical->contains(object) || !(*critical)[object].is_object())
      return std::string();
    const nlohmann::json& o = (*critical)[object];
    return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
  };
  if (critical == nullptr || critical->value("type", "") != kSimpleSigningType)
    return util::MakeError("the signed payload is not a cosign simple-signing payload");
  std::string signed_digest = text("image", "docker-manifest-digest");
  if (signed_digest != digest)
    return util::MakeError("the signature is of another manifest (" + signed_digest.substr(0, 19) +
                           "..., not " + digest.substr(0, 19) + "...)");
  return SignedBy{by->name(), std::string(payload), std::string(signature)};
}

std::string SignArtifact(const std::string& reference, const std::string& digest,
                         const Signer& signer, const image::RegistryOptions& options) {
  std::string payload = SimpleSigningPayload(Repository(reference), digest);
  std::string where = Sibling(reference, SignatureTag(digest));
  image::PushArtifact(
      where, kSignatureTypes, SignatureConfig(util::Sha256Digest(payload)), payload, options,
      {{std::string(kCosignSignatureAnnotation), image::Base64Encode(signer.Sign(payload))}});
  return where;
}

SignedBy VerifyArtifact(const std::string& reference, const std::string& digest,
                        const std::vector<PublicKey>& keys, const image::RegistryOptions& options,
                        const std::string& what) {
  std::string where = Sibling(reference, SignatureTag(digest));
  image::Artifact sig;
  try {
    sig = image::PullArtifact(where, kSignatureTypes, kMaxPayload, options);
  } catch (const util::Fatal& e) {
    throw util::Fatal(what + " is not signed: no signature in cosign's layout at " + where + " (" +
                      e.what() + ")");
  }
  nlohmann::json m = nlohmann::json::parse(sig.manifest, nullptr, false);
  std::string annotation;
  if (m.is_object() && m["layers"].is_array() && m["layers"][0].is_object() &&
      m["layers"][0].contains("annotations") && m["layers"][0]["annotations"].is_object()) {
    const nlohmann::json& a = m["layers"][0]["annotations"];
    auto it = a.find(std::string(kCosignSignatureAnnotation));
    if (it != a.end() && it->is_string()) annotation = it->get<std::string>();
  }
  util::Expected<SignedBy> by = CheckSimpleSigning(sig.layer, annotation, digest, keys);
  if (!by) throw util::Fatal(what + " is refused: " + by.error().message + " (" + where + ")");
  return std::move(by).value();
}

std::string SignatureRecord(const SignedBy& s) {
  return nlohmann::ordered_json{{"payload", s.payload}, {"signature", s.signature}}.dump();
}

std::string CheckSignatureRecord(const std::string& record, const std::string& digest,
                                 const std::vector<PublicKey>& keys) {
  nlohmann::json r = nlohmann::json::parse(record, nullptr, false);
  if (!r.is_object() || !r.contains("payload") || !r["payload"].is_string() ||
      !r.contains("signature") || !r["signature"].is_string())
    return "the signature record is unreadable";
  util::Expected<SignedBy> by = CheckSimpleSigning(r["payload"].get<std::string>(),
                                                   r["signature"].get<std::string>(), digest, keys);
  return by ? "" : by.error().message;
}

std::vector<PublicKey> KeysIn(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".pub" && e.is_regular_file()) paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<PublicKey> keys;
  keys.reserve(paths.size());
  for (const std::string& p : paths) keys.push_back(LoadPublicKey(p));
  return keys;
}

}  // namespace imgcheck::attest

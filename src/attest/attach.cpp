#include "attest/attach.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "attest/dsse.h"
#include "util/error.h"
#include "util/sha256.h"

namespace imgcheck::attest {
namespace {

constexpr std::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
constexpr std::string_view kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
constexpr std::string_view kOciConfig = "application/vnd.oci.image.config.v1+json";

// The layers of an existing .att manifest; util::Fatal when it is none or has too many.
nlohmann::ordered_json Layers(const image::Repository::Manifest& m, const std::string& what) {
  if (m.media_type != kOciManifest && m.media_type != kDockerManifest)
    throw util::Fatal(what + " is not an image manifest (" + m.media_type.substr(0, 80) + ")");
  auto j = nlohmann::ordered_json::parse(m.body, nullptr, false);
  auto layers = j.is_object() ? j.find("layers") : j.end();
  if (!j.is_object() || layers == j.end() || !layers->is_array())
    throw util::Fatal(what + " is not JSON with a layers list");
  if (layers->size() > kMaxAttestationLayers) {
    throw util::Fatal(what + " has " + std::to_string(layers->size()) + " layers, more than the " +
                      std::to_string(kMaxAttestationLayers) + " allowed");
  }
  for (const auto& l : *layers) {
    if (!l.is_object() || !l.contains("digest") || !l["digest"].is_string() ||
        !util::IsSha256Digest(l["digest"].get<std::string>()) || !l.contains("size") ||
        !l["size"].is_number_integer()) {
      throw util::Fatal(what + " has a layer without a sha256 digest and size");
    }
  }
  return std::move(*layers);
}

bool HasLayer(const nlohmann::ordered_json& layers, const std::string& digest) {
  for (const auto& l : layers)
    if (l["digest"] == digest) return true;
  return false;
}

// The config of an attestation manifest, as go-containerregistry's empty image has it (cosign
// builds on that): no OS, no architecture, the layers' digests as diff_ids (they are not
// compressed). Verifiers do not read it; registries want one.
std::string Config(const nlohmann::ordered_json& layers) {
  nlohmann::ordered_json diff_ids = nlohmann::ordered_json::array();
  for (const auto& l : layers) diff_ids.push_back(l["digest"]);
  nlohmann::ordered_json c;
  c["architecture"] = "";
  c["created"] = "0001-01-01T00:00:00Z";
  c["os"] = "";
  c["rootfs"] = {{"type", "layers"}, {"diff_ids", std::move(diff_ids)}};
  c["config"] = nlohmann::ordered_json::object();
  return c.dump();
}

}  // namespace

std::string AttestationTag(const std::string& digest) {
  std::string tag = digest;
  tag[tag.find(':')] = '-';
  return tag + ".att";
}

std::string Attach(image::Repository& repo, const std::string& digest, const std::string& envelope,
                   std::string_view predicate_type, const AttachOptions& options) {
  if (!util::IsSha256Digest(digest)) throw util::Fatal("cannot attest digest '" + digest + "'");
  const std::string tag = AttestationTag(digest);
  const std::string what = "the attestations " + repo.Name() + ":" + tag;
  nlohmann::ordered_json mine;
  mine["mediaType"] = kDsseMediaType;
  mine["size"] = envelope.size();
  mine["digest"] = repo.PutBlob(envelope);
  mine["annotations"] = {{std::string(kCosignSignatureAnnotation), ""},
                         {std::string(kPredicateTypeAnnotation), predicate_type}};
  const std::string my_digest = mine["digest"];
  auto sleep = [&options](std::chrono::milliseconds d) {
    if (options.sleep) {
      options.sleep(d);
    } else {
      std::this_thread::sleep_for(d);
    }
  };
  for (int attempt = 0; attempt < options.max_tries; ++attempt) {
    auto existing = repo.GetManifest(tag, kMaxAttestationManifest);
    nlohmann::ordered_json layers =
        existing ? Layers(*existing, what) : nlohmann::ordered_json::array();
    if (attempt > 0 && HasLayer(layers, my_digest)) return existing->digest;
    if (layers.size() >= kMaxAttestationLayers)
      throw util::Fatal(what + " already has " + std::to_string(layers.size()) + " layers");
    layers.push_back(mine);
    std::string config = Config(layers);
    nlohmann::ordered_json m;
    m["schemaVersion"] = 2;
    m["mediaType"] = kOciManifest;
    m["config"] = {
        {"mediaType", kOciConfig}, {"size", config.size()}, {"digest", repo.PutBlob(config)}};
    m["layers"] = std::move(layers);
    repo.PutManifest(tag, m.dump(), kOciManifest);
    sleep(options.settle);
    auto after = repo.GetManifest(tag, kMaxAttestationManifest);
    if (after && HasLayer(Layers(*after, what), my_digest)) return after->digest;
  }
  throw util::Fatal(what + ": the attestation was overwritten by concurrent writers " +
                    std::to_string(options.max_tries) + " times");
}

std::vector<Fetched> FetchAttestations(image::Repository& repo, const std::string& digest) {
  if (!util::IsSha256Digest(digest)) throw util::Fatal("bad image digest '" + digest + "'");
  const std::string tag = AttestationTag(digest);
  auto m = repo.GetManifest(tag, kMaxAttestationManifest);
  std::vector<Fetched> out;
  if (!m) return out;
  for (const auto& l : Layers(*m, "the attestations " + repo.Name() + ":" + tag)) {
    if (!l.contains("mediaType") || l["mediaType"] != kDsseMediaType) continue;
    Fetched f;
    f.layer_digest = l["digest"];
    int64_t size = l["size"];
    if (size < 0 || static_cast<uint64_t>(size) > kMaxEnvelopeBytes) {
      f.error = "the envelope is " + std::to_string(size) + " bytes, more than the " +
                std::to_string(kMaxEnvelopeBytes) + " allowed";
    } else {
      try {
        f.envelope = repo.GetBlob(f.layer_digest, static_cast<uint64_t>(size));
        if (f.envelope.size() != static_cast<uint64_t>(size)) {
          f.error = "the registry served " + std::to_string(f.envelope.size()) +
                    " bytes for a layer of " + std::to_string(size);
          f.envelope.clear();
        }
      } catch (const util::Fatal& e) {
        f.error = e.what();
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace imgcheck::attest

#include "attest/attach.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "attest/dsse.h"
#include "image/manifest.h"
#include "util/error.h"
#include "util/sha256.h"

namespace imgcheck::attest {
namespace {

using image::media::kDockerManifest;
using image::media::kOciConfig;
using image::media::kOciIndex;
using image::media::kOciManifest;

bool Has(const nlohmann::ordered_json& list, const std::string& digest) {
  for (const auto& l : list)
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

std::string ReferrersTag(const std::string& digest) {
  std::string tag = digest;
  tag[tag.find(':')] = '-';
  return tag;
}

std::string AttestationTag(const std::string& digest) { return ReferrersTag(digest) + ".att"; }

nlohmann::ordered_json ListOf(const image::Repository::Manifest& m, std::string_view key,
                              const std::string& what) {
  bool index = key == "manifests";
  if (index ? m.media_type != kOciIndex
            : (m.media_type != kOciManifest && m.media_type != kDockerManifest)) {
    throw util::Fatal(what + " is not an image " + (index ? "index" : "manifest") + " (" +
                      m.media_type.substr(0, 80) + ")");
  }
  nlohmann::ordered_json j = image::ParseOrderedJson(m.body, kMaxAttestationManifest, what);
  auto list = j.find(std::string(key));
  if (list == j.end() || !list->is_array())
    throw util::Fatal(what + " is not JSON with a " + std::string(key) + " list");
  if (list->size() > kMaxAttestationLayers) {
    throw util::Fatal(what + " has " + std::to_string(list->size()) + " " + std::string(key) +
                      ", more than the " + std::to_string(kMaxAttestationLayers) + " allowed");
  }
  for (const auto& l : *list) {
    if (!l.is_object() || !l.contains("digest") || !l["digest"].is_string() ||
        !util::IsSha256Digest(l["digest"].get<std::string>()) || !l.contains("size") ||
        !l["size"].is_number_integer()) {
      throw util::Fatal(what + " has an entry without a sha256 digest and size");
    }
  }
  return std::move(*list);
}

std::string AppendUnderTag(image::Repository& repo, const std::string& tag, std::string_view key,
                           const nlohmann::ordered_json& mine, const MakeDocument& make,
                           const AttachOptions& options) {
  const std::string what = "the attestations " + repo.Name() + ":" + tag;
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
    nlohmann::ordered_json list =
        existing ? ListOf(*existing, key, what) : nlohmann::ordered_json::array();
    if (attempt > 0 && Has(list, my_digest)) return existing->digest;
    if (list.size() >= kMaxAttestationLayers) {
      throw util::Fatal(what + " already has " + std::to_string(list.size()) + " " +
                        std::string(key));
    }
    list.push_back(mine);
    auto [body, media_type] = make(std::move(list));
    repo.PutManifest(tag, body, media_type);
    sleep(options.settle);
    auto after = repo.GetManifest(tag, kMaxAttestationManifest);
    if (after && Has(ListOf(*after, key, what), my_digest)) return after->digest;
  }
  throw util::Fatal(what + ": the attestation was overwritten by concurrent writers " +
                    std::to_string(options.max_tries) + " times");
}

std::string Attach(image::Repository& repo, const std::string& digest, const std::string& envelope,
                   std::string_view predicate_type, const AttachOptions& options) {
  if (!util::IsSha256Digest(digest)) throw util::Fatal("cannot attest digest '" + digest + "'");
  nlohmann::ordered_json mine;
  mine["mediaType"] = kDsseMediaType;
  mine["size"] = envelope.size();
  mine["digest"] = repo.PutBlob(envelope);
  mine["annotations"] = {{std::string(kCosignSignatureAnnotation), ""},
                         {std::string(kPredicateTypeAnnotation), predicate_type}};
  auto make = [&repo](nlohmann::ordered_json layers) {
    std::string config = Config(layers);
    nlohmann::ordered_json m;
    m["schemaVersion"] = 2;
    m["mediaType"] = kOciManifest;
    m["config"] = {
        {"mediaType", kOciConfig}, {"size", config.size()}, {"digest", repo.PutBlob(config)}};
    m["layers"] = std::move(layers);
    return std::pair<std::string, std::string_view>(m.dump(), kOciManifest);
  };
  return AppendUnderTag(repo, AttestationTag(digest), "layers", mine, make, options);
}

Fetched FetchLayer(image::Repository& repo, const nlohmann::ordered_json& layer, uint64_t limit,
                   std::string_view noun) {
  Fetched f;
  f.layer_digest = layer["digest"];
  int64_t size = layer["size"];
  if (size < 0 || static_cast<uint64_t>(size) > limit) {
    f.error = "the " + std::string(noun) + " is " + std::to_string(size) +
              " bytes, more than the " + std::to_string(limit) + " allowed";
    return f;
  }
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
  return f;
}

std::vector<Fetched> FetchAttestations(image::Repository& repo, const std::string& digest) {
  if (!util::IsSha256Digest(digest)) throw util::Fatal("bad image digest '" + digest + "'");
  const std::string tag = AttestationTag(digest);
  auto m = repo.GetManifest(tag, kMaxAttestationManifest);
  std::vector<Fetched> out;
  if (!m) return out;
  for (const auto& l : ListOf(*m, "layers", "the attestations " + repo.Name() + ":" + tag)) {
    if (!l.contains("mediaType") || l["mediaType"] != kDsseMediaType) continue;
    out.push_back(FetchLayer(repo, l, kMaxEnvelopeBytes, "envelope"));
  }
  return out;
}

}  // namespace imgcheck::attest

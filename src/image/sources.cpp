#include "image/sources.h"

#include <nlohmann/json.hpp>

#include "image/manifest.h"
#include "image/registry_reference.h"
#include "image/stream.h"
#include "util/error.h"
#include "util/sha256.h"
#include "util/text.h"

namespace imgcheck::image {

namespace {

using nlohmann::json;

constexpr std::string_view kRefAnnotation = "org.opencontainers.image.ref.name";
constexpr std::string_view kBlobDir = "blobs/sha256/";

std::string BlobName(const Descriptor& d, const std::string& what) {
  if (!util::IsSha256Digest(d.digest)) throw util::Fatal(what + ": blob without a valid digest");
  return std::string(kBlobDir) + d.digest.substr(7);
}

class OciLayoutSource : public Source {
 public:
  OciLayoutSource(std::unique_ptr<FileStore> store, std::string ref, std::string describe)
      : store_(std::move(store)), ref_(std::move(ref)), describe_(std::move(describe)) {}

  std::string Describe() const override { return describe_; }

  Descriptor Root() override {
    if (!store_->Has("oci-layout"))
      throw util::Fatal(describe_ + ": not an OCI layout (no oci-layout file)");
    index_ = store_->Read("index.json", kMaxManifestBytes);
    json doc = ParseJson(index_, kMaxManifestBytes, describe_ + ": index.json");
    std::vector<PlatformEntry> entries = ParseIndex(doc, describe_ + ": index.json");
    if (entries.empty()) throw util::Fatal(describe_ + ": index.json lists no images");
    const json& manifests = doc["manifests"];
    if (!ref_.empty()) {
      std::string tags;
      for (size_t i = 0; i < entries.size(); ++i) {
        std::string tag = RefName(manifests[i]);
        if (tag == ref_) return entries[i].descriptor;
        if (!tag.empty()) tags += (tags.empty() ? "" : ", ") + tag;
      }
      throw util::Fatal(describe_ + ": no image named '" + ref_ +
                        "' in index.json; names: " + (tags.empty() ? "(none)" : tags));
    }
    if (entries.size() == 1) return entries[0].descriptor;
    // Several entries and no name: index.json is itself the index to pick a platform from.
    Descriptor d;
    d.media_type = std::string(media::kOciIndex);
    d.location = "index.json";
    return d;
  }

  std::string ReadBlob(const Descriptor& d, uint64_t limit) override {
    if (d.digest.empty() && d.location == "index.json") return index_;
    return store_->Read(BlobName(d, describe_), limit);
  }

  std::unique_ptr<BlobReader> OpenBlob(const Descriptor& d) override {
    return store_->Open(BlobName(d, describe_));
  }
  const PrereadLayer* Preread(const Descriptor& d) override {
    return store_->Preread(BlobName(d, describe_));
  }

  std::optional<uint64_t> StatBlob(const Descriptor& d) override {
    return store_->Size(BlobName(d, describe_));
  }

 private:
  static std::string RefName(const json& m) {
    auto a = m.find("annotations");
    if (a == m.end() || !a->is_object()) return "";
    auto r = a->find(kRefAnnotation);
    return r != a->end() && r->is_string() ? r->get<std::string>() : "";
  }

  std::unique_ptr<FileStore> store_;
  std::string ref_, describe_, index_;
};

// A descriptor for a file of a docker save tarball: the digest when its name carries one
// (blobs/sha256/<hex>, <hex>.json), and always its location.
json ArchiveFileDescriptor(const std::string& media_type, const std::string& name) {
  std::string hex;
  if (name.starts_with(kBlobDir))
    hex = name.substr(kBlobDir.size());
  else if (name.size() == 69 && name.substr(64) == ".json")
    hex = name.substr(0, 64);
  json d{{"mediaType", media_type}, {"urls", json::array({name})}};
  if (util::IsSha256Digest("sha256:" + hex)) d["digest"] = "sha256:" + hex;
  return d;
}

class DockerArchiveSource : public Source {
 public:
  DockerArchiveSource(std::unique_ptr<FileStore> store, std::string ref, std::string describe)
      : store_(std::move(store)), ref_(std::move(ref)), describe_(std::move(describe)) {}

  std::string Describe() const override { return describe_; }

  Descriptor Root() override {
    std::string what = describe_ + ": manifest.json";
    std::string text = store_->Read("manifest.json", kMaxManifestBytes);
    // manifest.json is a JSON array; ParseJson takes objects, so wrap it.
    json doc = ParseJson("{\"m\":" + text + "}", kMaxManifestBytes + 6, what)["m"];
    if (!doc.is_array() || doc.empty()) throw util::Fatal(what + ": not a non-empty list");
    const json& entry = Select(doc, what);
    if (!entry.is_object() || !entry.contains("Config") || !entry["Config"].is_string())
      throw util::Fatal(what + ": entry without a Config file name");
    json manifest{{"schemaVersion", 2}, {"mediaType", media::kDockerManifest}};
    manifest["config"] = ArchiveFileDescriptor(std::string(media::kDockerConfig), entry["Config"]);
    manifest["layers"] = json::array();
    auto layers = entry.find("Layers");
    if (layers == entry.end() || !layers->is_array())
      throw util::Fatal(what + ": entry without Layers");
    for (const json& l : *layers) {
      if (!l.is_string()) throw util::Fatal(what + ": layer name is not a string");
      manifest["layers"].push_back(
          ArchiveFileDescriptor("application/vnd.docker.image.rootfs.diff.tar", l));
    }
    synthesized_ = manifest.dump();
    Descriptor d;
    d.media_type = std::string(media::kDockerManifest);
    d.location = "manifest.json";
    return d;
  }

  std::string ReadBlob(const Descriptor& d, uint64_t limit) override {
    if (d.location == "manifest.json") return synthesized_;
    return store_->Read(d.location, limit);
  }

  std::unique_ptr<BlobReader> OpenBlob(const Descriptor& d) override {
    return store_->Open(d.location);
  }
  const PrereadLayer* Preread(const Descriptor& d) override { return store_->Preread(d.location); }

  std::optional<uint64_t> StatBlob(const Descriptor& d) override {
    return store_->Size(d.location);
  }

 private:
  const json& Select(const json& doc, const std::string& what) const {
    if (ref_.empty()) {
      if (doc.size() == 1) return doc[0];
      throw util::Fatal(what + ": holds " + std::to_string(doc.size()) +
                        " images; name one: " + Tags(doc));
    }
    if (ref_.front() == '@') {
      std::optional<size_t> n = util::ParseInt<size_t>(std::string_view(ref_).substr(1));
      if (!n) throw util::Fatal(what + ": bad image index '" + ref_ + "'");
      if (*n >= doc.size())
        throw util::Fatal(what + ": no image " + ref_ + "; it holds " + std::to_string(doc.size()));
      return doc[*n];
    }
    // Tags compare as references: "example/img:1" is "docker.io/example/img:1".
    std::string want = Canonical(ref_);
    for (const json& e : doc) {
      if (!e.is_object() || !e.contains("RepoTags") || !e["RepoTags"].is_array()) continue;
      for (const json& t : e["RepoTags"])
        if (t.is_string() && Canonical(t.get<std::string>()) == want) return e;
    }
    throw util::Fatal(what + ": no image tagged '" + ref_ + "'; tags: " + Tags(doc));
  }

  static std::string Canonical(const std::string& name) {
    util::Expected<Reference> r = ParseReference(name);
    return r ? r->String() : name;
  }

  static std::string Tags(const json& doc) {
    std::string out;
    for (size_t i = 0; i < doc.size(); ++i) {
      std::string tag = "@" + std::to_string(i);
      if (doc[i].is_object() && doc[i].contains("RepoTags") && doc[i]["RepoTags"].is_array() &&
          !doc[i]["RepoTags"].empty() && doc[i]["RepoTags"][0].is_string())
        tag = doc[i]["RepoTags"][0].get<std::string>();
      out += (out.empty() ? "" : ", ") + tag;
    }
    return out;
  }

  std::unique_ptr<FileStore> store_;
  std::string ref_, describe_, synthesized_;
};

}  // namespace

std::unique_ptr<Source> OpenOciLayout(std::unique_ptr<FileStore> store, std::string ref,
                                      std::string describe) {
  return std::make_unique<OciLayoutSource>(std::move(store), std::move(ref), std::move(describe));
}

std::unique_ptr<Source> OpenDockerArchive(std::unique_ptr<FileStore> store, std::string ref,
                                          std::string describe) {
  if (!store->Has("manifest.json")) {
    if (store->Has("index.json"))
      return OpenOciLayout(std::move(store), std::move(ref), std::move(describe));
    throw util::Fatal(describe + ": not a docker save archive (no manifest.json)");
  }
  return std::make_unique<DockerArchiveSource>(std::move(store), std::move(ref),
                                               std::move(describe));
}

}  // namespace imgcheck::image

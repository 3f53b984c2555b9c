#include "image/manifest.h"

#include <nlohmann/json.hpp>

#include "image/stream.h"
#include "util/error.h"
#include "util/json_scan.h"
#include "util/path.h"
#include "util/sha256.h"

namespace imgcheck::image {

using nlohmann::json;

namespace {

constexpr size_t kMaxDepth = 64;

std::string GetString(const json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_string()) throw util::Fatal(what + ": '" + key + "' is not a string");
  return it->get<std::string>();
}

std::vector<std::string> GetStrings(const json& j, const char* key, const std::string& what) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) throw util::Fatal(what + ": '" + key + "' is not a list of strings");
  for (const json& v : *it) {
    if (!v.is_string()) throw util::Fatal(what + ": '" + key + "' is not a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

const json& GetArray(const json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array())
    throw util::Fatal(what + ": '" + key + "' is missing or not a list");
  return *it;
}

}  // namespace

namespace {

template <class Json>
Json ParseBounded(std::string_view bytes, uint64_t limit, const std::string& what) {
  if (bytes.size() > limit)
    throw util::Fatal(what + ": " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                      std::to_string(limit));
  if (util::ScanJson(bytes).depth > kMaxDepth) throw util::Fatal(what + ": JSON nested too deeply");
  Json j = Json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw util::Fatal(what + ": malformed JSON");
  if (!j.is_object()) throw util::Fatal(what + ": not a JSON object");
  return j;
}

}  // namespace

json ParseJson(std::string_view bytes, uint64_t limit, const std::string& what) {
  return ParseBounded<json>(bytes, limit, what);
}

nlohmann::ordered_json ParseOrderedJson(std::string_view bytes, uint64_t limit,
                                        const std::string& what) {
  return ParseBounded<nlohmann::ordered_json>(bytes, limit, what);
}

Descriptor ParseDescriptor(const json& j, const std::string& what) {
  if (!j.is_object()) throw util::Fatal(what + ": descriptor is not an object");
  Descriptor d;
  d.media_type = GetString(j, "mediaType", what);
  d.digest = GetString(j, "digest", what);
  // A blob with no digest must say where it is (a legacy docker-archive's "<id>/layer.tar",
  // given as the descriptor's first url). Only that transport accepts such descriptors.
  std::vector<std::string> urls = GetStrings(j, "urls", what);
  if (!urls.empty()) d.location = urls.front();
  if (!util::IsSha256Digest(d.digest) && d.location.empty())
    throw util::Fatal(what + ": unsupported or malformed digest '" + d.digest + "'");
  // The size is required (image-spec descriptor.md): every read of the blob is bounded by it,
  // so a blob that streams for ever is refused one byte past it instead of at the deadline.
  auto size = j.find("size");
  if (size == j.end())
    throw util::Fatal(what + ": descriptor of " + (d.digest.empty() ? d.location : d.digest) +
                      " has no size (the OCI image spec requires one)");
  if (!size->is_number_integer() || size->get<int64_t>() < 0)
    throw util::Fatal(what + ": descriptor size is not a non-negative integer");
  d.size = size->get<int64_t>();
  return d;
}

DocumentKind KindOf(const std::string& media_type, const json& doc, const std::string& what) {
  std::string type = media_type.empty() ? GetString(doc, "mediaType", what) : media_type;
  if (type == media::kOciIndex || type == media::kDockerList) return DocumentKind::kIndex;
  if (type == media::kOciManifest || type == media::kDockerManifest) return DocumentKind::kManifest;
  if (type.find("distribution.manifest.v1") != std::string::npos)
    throw util::Fatal(what + ": Docker schema 1 manifests are not supported (" + type + ")");
  if (type.empty()) {
    // OCI lets mediaType be absent; tell the two documents apart by their fields.
    if (doc.contains("manifests")) return DocumentKind::kIndex;
    if (doc.contains("layers")) return DocumentKind::kManifest;
    throw util::Fatal(what + ": neither an image index nor a manifest");
  }
  throw util::Fatal(what + ": unknown media type " + type);
}

std::string PlatformEntry::Name() const {
  return os + "/" + architecture + (variant.empty() ? "" : "/" + variant);
}

std::vector<PlatformEntry> ParseIndex(const json& doc, const std::string& what) {
  std::vector<PlatformEntry> out;
  for (const json& m : GetArray(doc, "manifests", what)) {
    PlatformEntry e;
    e.descriptor = ParseDescriptor(m, what);
    if (auto p = m.find("platform"); p != m.end() && p->is_object()) {
      e.os = GetString(*p, "os", what);
      e.architecture = GetString(*p, "architecture", what);
      e.variant = GetString(*p, "variant", what);
    }
    out.push_back(std::move(e));
  }
  return out;
}

const PlatformEntry& SelectPlatform(const std::vector<PlatformEntry>& entries,
                                    const std::string& platform, const std::string& what) {
  std::vector<std::string> want = util::Split(platform, '/');
  if (want.size() < 2 || want.size() > 3 || want[0].empty() || want[1].empty())
    throw util::Fatal("bad --platform '" + platform + "': expected os/arch[/variant]");
  const PlatformEntry* best = nullptr;
  for (const PlatformEntry& e : entries) {
    if (e.os != want[0] || e.architecture != want[1]) continue;
    if (want.size() == 3 && e.variant != want[2]) continue;
    // Without a requested variant, an entry without one (or the first) wins.
    if (best == nullptr || (!best->variant.empty() && e.variant.empty())) best = &e;
  }
  if (best != nullptr) return *best;
  std::string available;
  for (const PlatformEntry& e : entries) {
    if (e.os.empty() || e.os == "unknown") continue;  // attestations and the like
    available += (available.empty() ? "" : ", ") + e.Name();
  }
  throw util::Fatal(what + ": no image for platform " + platform +
                    "; available: " + (available.empty() ? "(none)" : available));
}

Manifest ParseManifest(const json& doc, const std::string& what) {
  Manifest m;
  auto config = doc.find("config");
  if (config == doc.end()) throw util::Fatal(what + ": no config descriptor");
  m.config = ParseDescriptor(*config, what + " config");
  if (!m.config.media_type.empty() && m.config.media_type != media::kOciConfig &&
      m.config.media_type != media::kDockerConfig)
    throw util::Fatal(what + ": unknown config media type " + m.config.media_type);
  for (const json& l : GetArray(doc, "layers", what)) {
    Descriptor d = ParseDescriptor(l, what + " layer");
    if (!IsLayerMediaType(d.media_type))
      throw util::Fatal(what + ": unknown layer media type " +
                        (d.media_type.empty() ? "(none)" : d.media_type));
    m.layers.push_back(std::move(d));
  }
  return m;
}

ParsedConfig ParseConfig(const json& doc, const std::string& what) {
  ParsedConfig out;
  Config& c = out.config;
  c.os = GetString(doc, "os", what);
  c.architecture = GetString(doc, "architecture", what);
  c.variant = GetString(doc, "variant", what);
  if (auto it = doc.find("config"); it != doc.end() && it->is_object()) {
    const json& cc = *it;
    c.env = GetStrings(cc, "Env", what);
    c.entrypoint = GetStrings(cc, "Entrypoint", what);
    c.cmd = GetStrings(cc, "Cmd", what);
    c.working_dir = GetString(cc, "WorkingDir", what);
    c.user = GetString(cc, "User", what);
    if (auto labels = cc.find("Labels"); labels != cc.end() && !labels->is_null()) {
      if (!labels->is_object()) throw util::Fatal(what + ": 'Labels' is not an object");
      for (const auto& [k, v] : labels->items()) {
        if (!v.is_string()) throw util::Fatal(what + ": label '" + k + "' is not a string");
        c.labels[k] = v.get<std::string>();
      }
    }
  }
  auto rootfs = doc.find("rootfs");
  if (rootfs == doc.end() || !rootfs->is_object()) throw util::Fatal(what + ": no rootfs");
  out.diff_ids = GetStrings(*rootfs, "diff_ids", what);
  for (const std::string& d : out.diff_ids)
    if (!util::IsSha256Digest(d)) throw util::Fatal(what + ": malformed diff_id '" + d + "'");
  if (auto h = doc.find("history"); h != doc.end() && h->is_array()) {
    for (const json& entry : *h) {
      if (!entry.is_object()) throw util::Fatal(what + ": history entry is not an object");
      auto empty = entry.find("empty_layer");
      bool empty_layer = empty != entry.end() && empty->is_boolean() && empty->get<bool>();
      out.config.history.push_back({GetString(entry, "created_by", what), empty_layer});
      if (!empty_layer) out.layer_history.push_back(out.config.history.back().created_by);
    }
  }
  return out;
}

bool IsLayerMediaType(std::string_view media_type) {
  static constexpr std::string_view kTypes[] = {
      "application/vnd.oci.image.layer.v1.tar",
      "application/vnd.oci.image.layer.v1.tar+gzip",
      "application/vnd.oci.image.layer.v1.tar+zstd",
      "application/vnd.oci.image.layer.nondistributable.v1.tar",
      "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
      "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
      "application/vnd.docker.image.rootfs.diff.tar",
      "application/vnd.docker.image.rootfs.diff.tar.gzip",
      "application/vnd.docker.image.rootfs.diff.tar.zstd",
      "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
  };
  for (std::string_view k : kTypes)
    if (media_type == k) return true;
  return false;
}

}  // namespace imgcheck::image

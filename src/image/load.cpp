// Load(): reference -> transport -> manifest -> config -> layers (verified) -> merged tree.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "image/docker_daemon.h"
#include "image/image.h"
#include "image/layer.h"
#include "image/manifest.h"
#include "image/merge.h"
#include "image/read_layers.h"
#include "image/registry_reference.h"
#include "image/sources.h"
#include "image/stream.h"
#include "image/transports.h"
#include "util/error.h"
#include "util/profile.h"
#include "util/sha256.h"

namespace imgcheck::image {

namespace {

constexpr int kMaxIndexDepth = 4;  // an index may point at an index, but not forever

// A blob that does not hash to its descriptor's digest: the cause to report, even when reading
// the blob failed first.
class DigestMismatch : public util::Fatal {
 public:
  DigestMismatch(const std::string& what, const std::string& got)
      : util::Fatal(what + ": digest mismatch: content is " + got) {}
};

// A blob whose content digest `got` is not the one its descriptor states (when it states one).
void VerifyContentDigest(const Descriptor& d, const std::string& got, const std::string& what) {
  if (!d.digest.empty() && got != d.digest) throw DigestMismatch(what, got);
}

// Checks a blob's size against its descriptor's (when it states one).
void CheckSize(const Descriptor& d, uint64_t size, const std::string& what) {
  if (d.size >= 0 && static_cast<uint64_t>(d.size) != size)
    throw util::Fatal(what + ": size mismatch: descriptor says " + std::to_string(d.size) +
                      " bytes, blob has " + std::to_string(size));
}

// A blob longer than its descriptor says: the cause to report, whatever reading it broke.
class Oversized : public util::Fatal {
 public:
  using util::Fatal::Fatal;
};

// A blob read no further than its descriptor's size: a source that sends more (a registry's
// endless body) fails after one byte past it instead of being read for ever.
class DescriptorBound : public BlobReader {
 public:
  DescriptorBound(std::unique_ptr<BlobReader> in, const Descriptor& d, std::string what)
      : in_(std::move(in)), limit_(static_cast<uint64_t>(d.size)), what_(std::move(what)) {}
  size_t Read(char* buf, size_t n) override {
    if (read_ == limit_) {
      char extra;
      if (in_->Read(&extra, 1) > 0)
        throw Oversized(what_ + ": size mismatch: descriptor says " + std::to_string(limit_) +
                        " bytes, blob has more");
      return 0;
    }
    size_t got = in_->Read(buf, static_cast<size_t>(std::min<uint64_t>(n, limit_ - read_)));
    read_ += got;
    return got;
  }
  std::optional<uint64_t> Size() const override { return in_->Size(); }

 private:
  std::unique_ptr<BlobReader> in_;
  uint64_t limit_, read_ = 0;
  std::string what_;
};

// Opens a layer blob, its size checked against the descriptor before any byte is read where
// the source knows it, and its reading bounded by the descriptor's size.
std::unique_ptr<BlobReader> OpenChecked(Source& src, const Descriptor& d, const std::string& what) {
  std::unique_ptr<BlobReader> blob = src.OpenBlob(d);
  if (std::optional<uint64_t> size = blob->Size()) CheckSize(d, *size, what);
  if (d.size < 0) return blob;
  return std::make_unique<DescriptorBound>(std::move(blob), d, what);
}

// Checks a small blob against its descriptor.
void Verify(const Descriptor& d, std::string_view bytes, const std::string& what) {
  CheckSize(d, bytes.size(), what);
  if (!d.digest.empty()) VerifyContentDigest(d, util::Sha256Digest(bytes), what);
}

// The checks below, for a layer its transport read as it streamed past.
LayerContents CheckPreread(const PrereadLayer& pre, const Descriptor& d, const std::string& diff_id,
                           int index, const std::string& what) {
  const LayerContents& c = pre.contents;
  if (!d.digest.empty() && c.digest != d.digest)
    throw util::Fatal(what + ": digest mismatch: content is " + c.digest);
  if (!pre.error.empty()) throw util::Fatal(what + ": " + pre.error);
  if (d.size >= 0 && c.compressed_size != static_cast<uint64_t>(d.size))
    throw util::Fatal(what + ": size mismatch: descriptor says " + std::to_string(d.size) +
                      " bytes, blob has " + std::to_string(c.compressed_size));
  if (c.diff_id != diff_id)
    throw util::Fatal(what + ": diff_id mismatch: config says " + diff_id +
                      ", uncompressed content is " + c.diff_id);
  LayerContents out = c;
  for (auto& diag : out.diagnostics) diag.layer = index;
  return out;
}

// Reads and checks one layer (on a worker thread: see read_layers.h), its blob opened through
// `track`. A corrupt stream whose blob does not match its digest is reported as the digest
// mismatch: that is the cause.
std::string LayerWhat(const Source& src, const Descriptor& d, int index) {
  return src.Describe() + ": layer " + std::to_string(index) +
         (d.digest.empty() ? " (" + d.location + ")" : " " + d.digest);
}

LayerContents ReadVerified(Source& src, const Descriptor& d, const std::string& diff_id, int index,
                           const LoadOptions& options, const DigestPlan& digests,
                           ImageBudget& budget, const TrackBlob& track) {
  std::string what = LayerWhat(src, d, index);
  if (const PrereadLayer* pre = src.Preread(d)) return CheckPreread(*pre, d, diff_id, index, what);
  std::unique_ptr<BlobReader> blob = track(OpenChecked(src, d, what));
  HashingReader stored(*blob);
  LayerContents contents;
  try {
    contents = ReadLayer(stored, index, options.capture, budget, digests);
  } catch (const Oversized&) {
    throw;
  } catch (const util::Fatal& e) {
    try {
      VerifyContentDigest(d, stored.Finish(), what);
    } catch (const DigestMismatch&) {
      throw;
    } catch (const util::Fatal&) {  // the stream's own error says more
    }
    throw util::Fatal(what + ": " + e.what());
  }
  std::string got = stored.Finish();
  VerifyContentDigest(d, got, what);
  CheckSize(d, stored.count(), what);
  if (contents.diff_id != diff_id)
    throw util::Fatal(what + ": diff_id mismatch: config says " + diff_id +
                      ", uncompressed content is " + contents.diff_id);
  contents.digest = got;
  contents.compressed_size = stored.count();
  return contents;
}

// From the source's root through indexes (picking `platform`) to the image manifest: its
// descriptor, and its parsed JSON in `doc` (and its bytes in `bytes_out` when given).
Descriptor FindManifest(Source& src, const std::string& platform, nlohmann::json& doc,
                        std::string* bytes_out = nullptr) {
  Descriptor d = src.Root();
  for (int depth = 0;; ++depth) {
    if (depth > kMaxIndexDepth) throw util::Fatal(src.Describe() + ": indexes nested too deeply");
    std::string what =
        src.Describe() + ": " + (d.digest.empty() ? d.location : "manifest " + d.digest);
    std::string bytes = src.ReadBlob(d, kMaxManifestBytes);
    Verify(d, bytes, what);
    doc = ParseJson(bytes, kMaxManifestBytes, what);
    if (KindOf(d.media_type, doc, what) == DocumentKind::kManifest) {
      if (bytes_out) *bytes_out = std::move(bytes);
      return d;
    }
    d = SelectPlatform(ParseIndex(doc, what), platform, what).descriptor;
  }
}

// The image config, verified against its descriptor: from the shared tier when it has it (a
// value that fails the check is discarded there), else from the source (and kept there).
std::string ReadConfig(Source& src, const Descriptor& d, const LoadOptions& options,
                       const std::string& what) {
  SharedLayers* shared = d.digest.empty() ? nullptr : options.shared_layers.get();
  std::string name = "config:" + d.digest;
  if (shared) {
    if (std::optional<std::string> bytes = shared->Get(name)) {
      try {
        Verify(d, *bytes, what);
        return std::move(*bytes);
      } catch (const util::Fatal&) {
        shared->Discard(name, "does not match its digest");
      }
    }
  }
  std::string bytes = src.ReadBlob(d, kMaxConfigBytes);
  Verify(d, bytes, what);
  if (shared) shared->Put(name, bytes);
  return bytes;
}

void LoadFromSource(Source& src, const std::string& transport, const LoadOptions& options,
                    Image& img) {
  nlohmann::json doc;
  Descriptor d = FindManifest(src, options.platform, doc);
  img.manifest_digest = d.digest;
  std::string what = src.Describe() + ": manifest" + (d.digest.empty() ? "" : " " + d.digest);
  Manifest m = ParseManifest(doc, what);
  bool digestless_ok = transport == "docker-archive";  // legacy <id>/layer.tar has no digest
  auto require_digest = [&](const Descriptor& x) {
    if (x.digest.empty() && !digestless_ok)
      throw util::Fatal(what + ": descriptor without a digest");
  };
  require_digest(m.config);
  for (const Descriptor& l : m.layers) require_digest(l);

  std::string cwhat = src.Describe() + ": config " +
                      (m.config.digest.empty() ? m.config.location : m.config.digest);
  std::string config_bytes = ReadConfig(src, m.config, options, cwhat);
  ParsedConfig pc = ParseConfig(ParseJson(config_bytes, kMaxConfigBytes, cwhat), cwhat);
  img.config_digest = m.config.digest;
  // A legacy docker save archive has no manifest blob: its image is named by the config
  // digest, which is Docker's image ID.
  if (img.manifest_digest.empty()) img.manifest_digest = m.config.digest;
  if (!options.manifest_digest.empty() && img.manifest_digest != options.manifest_digest)
    throw util::Fatal(src.Describe() + ": manifest is now " + img.manifest_digest + ", not the " +
                      options.manifest_digest + " read before");
  img.config = pc.config;
  if (pc.diff_ids.size() != m.layers.size())
    throw util::Fatal(cwhat + ": lists " + std::to_string(pc.diff_ids.size()) +
                      " diff_ids but the manifest has " + std::to_string(m.layers.size()) +
                      " layers");
  if (!pc.layer_history.empty() && pc.layer_history.size() != m.layers.size())
    img.diagnostics.push_back({"", -1,
                               "config history has " + std::to_string(pc.layer_history.size()) +
                                   " non-empty entries for " + std::to_string(m.layers.size()) +
                                   " layers; created_by may be misattributed"});
  std::vector<LayerJob> jobs;
  // A digestless layer is cached by its diff_id, which only a verified config vouches for.
  bool trusted_diff_ids = !m.config.digest.empty();
  for (size_t i = 0; i < m.layers.size(); ++i) {
    Layer layer;
    layer.index = static_cast<int>(i);
    layer.digest = m.layers[i].digest;
    layer.diff_id = pc.diff_ids[i];
    layer.media_type = m.layers[i].media_type;
    if (i < pc.layer_history.size()) layer.created_by = pc.layer_history[i];
    std::string cache_diff_id = layer.digest.empty() && !trusted_diff_ids ? "" : layer.diff_id;
    if (!options.read_layer || options.read_layer(layer.index))
      jobs.push_back({layer.index,
                      {layer.digest, cache_diff_id, options.capture ? options.capture_id : ""},
                      static_cast<uint64_t>(std::max<int64_t>(0, m.layers[i].size)),
                      {}});
    img.layers.push_back(std::move(layer));
  }
  // Layers are read on up to options.jobs threads (or found in the cache), merged in order here.
  std::unique_ptr<LayerCache> cache = OpenLayerCache(options);
  ReadLayersOptions speed = SpeedOptions(options, cache.get());
  // The cache vouches for the content, not for the image: its blob must still be there, as big
  // as its descriptor says (stat only; the content was verified when it was first read).
  ImageBudget budget(options.limits);
  speed.check_cached = [&](const LayerJob& j, const LayerContents& cached) {
    budget.Charge(cached);
    if (!options.stat_cached) return;
    const Descriptor& ld = m.layers[j.index];
    std::string lwhat = LayerWhat(src, ld, j.index);
    std::optional<uint64_t> size;
    try {
      size = src.StatBlob(ld);
    } catch (const util::Fatal& e) {
      throw util::Fatal(lwhat + ": " + e.what());
    }
    if (size) CheckSize(ld, *size, lwhat);
  };
  if (options.digests.stated) {
    speed.stated = [&](const LayerJob&, const LayerContents& c) {
      return options.digests.stated(c, img.tree);
    };
    speed.dropped = [&](const LayerContents& c) { budget.Refund(c); };
  }
  ReadLayers(
      jobs, speed,
      [&](const LayerJob& j, const TrackBlob& track) {
        return ReadVerified(src, m.layers[j.index], pc.diff_ids[j.index], j.index, options,
                            j.digests, budget, track);
      },
      [&](const LayerJob& j, LayerContents& contents) {
        util::ProfileSpan span(util::Stage::kMerge);
        Layer& layer = img.layers[j.index];
        layer.compressed_size = contents.compressed_size;
        layer.size = contents.size;
        LayerStats s = Merge(img.tree, contents, layer.index, img.diagnostics);
        layer.added = s.added;
        layer.changed = s.changed;
        layer.deleted = s.deleted;
      });
}

// Splits "PATH[:REF]" at the first colon, as skopeo does for these transports.
std::pair<std::string, std::string> PathAndRef(std::string_view rest) {
  size_t colon = rest.find(':');
  if (colon == std::string_view::npos) return {std::string(rest), ""};
  return {std::string(rest.substr(0, colon)), std::string(rest.substr(colon + 1))};
}

Image FromSource(std::unique_ptr<Source> src, const std::string& transport,
                 const LoadOptions& options) {
  Image img;
  LoadFromSource(*src, transport, options, img);
  return img;
}

Image LoadOci(std::string_view rest, const LoadOptions& options) {
  auto [path, ref] = PathAndRef(rest);
  return FromSource(OpenOciLayout(OpenDirStore(path), ref, "oci:" + std::string(rest)), "oci",
                    options);
}

Image LoadOciArchive(std::string_view rest, const LoadOptions& options) {
  auto [path, ref] = PathAndRef(rest);
  return FromSource(
      OpenOciLayout(OpenTarStore(path, options.limits), ref, "oci-archive:" + std::string(rest)),
      "oci-archive", options);
}

Image LoadDockerArchive(std::string_view rest, const LoadOptions& options) {
  auto [path, ref] = PathAndRef(rest);
  return FromSource(OpenDockerArchive(OpenTarStore(path, options.limits), ref,
                                      "docker-archive:" + std::string(rest)),
                    "docker-archive", options);
}

// The registry options with the time bounds of options.limits.
RegistryOptions BoundedRegistryOptions(const LoadOptions& options) {
  RegistryOptions r = options.registry;
  r.read_timeout_s = options.limits.read_timeout_s;
  r.min_rate = options.limits.min_rate;
  r.deadline_s = options.limits.deadline_s;
  return r;
}

// A registry source whose root, an image manifest fetched before, is served from memory.
class KnownRootSource : public Source {
 public:
  KnownRootSource(std::unique_ptr<Source> inner, std::shared_ptr<const KnownManifest> known)
      : inner_(std::move(inner)), known_(std::move(known)) {}
  std::string Describe() const override { return inner_->Describe(); }
  Descriptor Root() override {
    return {known_->media_type, known_->digest, static_cast<int64_t>(known_->bytes.size()), {}};
  }
  std::string ReadBlob(const Descriptor& d, uint64_t limit) override {
    if (d.digest == known_->digest && known_->bytes.size() <= limit) return known_->bytes;
    return inner_->ReadBlob(d, limit);
  }
  std::unique_ptr<BlobReader> OpenBlob(const Descriptor& d) override { return inner_->OpenBlob(d); }
  std::optional<uint64_t> StatBlob(const Descriptor& d) override { return inner_->StatBlob(d); }

 private:
  std::unique_ptr<Source> inner_;
  std::shared_ptr<const KnownManifest> known_;
};

Image LoadRegistry(std::string_view rest, const LoadOptions& options) {
  std::unique_ptr<Source> src = OpenRegistry(std::string(rest), BoundedRegistryOptions(options));
  if (const auto& known = options.known_manifest; known != nullptr) {
    auto ref = ParseReference(std::string(rest));
    if (ref && !ref->digest.empty() && ref->digest == known->digest)
      src = std::make_unique<KnownRootSource>(std::move(src), known);
  }
  return FromSource(std::move(src), "docker", options);
}

// An OCI layout directory: the oci-layout marker file and index.json (image-layout.md).
bool IsOciLayout(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p(path);
  return std::filesystem::is_regular_file(p / "oci-layout", ec) &&
         std::filesystem::is_regular_file(p / "index.json", ec);
}

// Whether the regular file at `path` is a tar holding `member` (a file that is not a tar holds
// nothing).
bool TarHolds(const std::string& path, const std::string& member) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  try {
    return OpenTarStore(path)->Has(member);
  } catch (const util::Fatal&) {
    return false;
  }
}

// docker save writes manifest.json (Docker 25+ an OCI layout too: docker-archive reads both).
bool IsDockerArchive(const std::string& path) { return TarHolds(path, "manifest.json"); }
bool IsOciArchive(const std::string& path) {
  return TarHolds(path, "oci-layout") && !IsDockerArchive(path);
}

Image LoadDir(std::string_view rest, const LoadOptions& options) {
  // An image on disk is not a root file system: scanning its blobs as files finds nothing.
  if (const Transport* t = RecognizePath(std::string(rest)))
    throw util::Fatal("dir:" + std::string(rest) + ": " + std::string(rest) + " is " +
                      std::string(t->summary) + ", not a root file system: use " +
                      std::string(t->name) + ":" + std::string(rest));
  Image img;
  ImageBudget budget(options.limits);
  LayerContents c = ReadDirectory(std::string(rest), options.capture, budget);
  Layer layer;
  layer.size = c.size;
  layer.created_by = "dir:" + std::string(rest);
  LayerStats s = Merge(img.tree, c, 0, img.diagnostics);
  layer.added = s.added;
  layer.changed = s.changed;
  layer.deleted = s.deleted;
  img.layers.push_back(layer);
  return img;
}

Image LoadDockerDaemon(std::string_view rest, const LoadOptions& options) {
  // The export is a docker-archive (legacy, or OCI form from Docker 25 on).
  return FromSource(
      OpenDockerArchive(OpenDaemonStore(rest, options.capture, options.limits,
                                        DigestPlan{nullptr, options.digests.candidate}),
                        "", "docker-daemon:" + std::string(rest)),
      "docker-archive", options);
}

// No maintained C or C++ reader of containers/storage exists (Debian ships only the Go library
// inside podman, buildah and skopeo), and its on-disk layout is that library's private business.
Image LoadContainersStorage(std::string_view rest, const LoadOptions&) {
  std::string name(rest);
  throw util::Fatal("containers-storage:" + name +
                    " cannot be read directly; export it first: `podman save --format "
                    "docker-archive -o image.tar " +
                    name + "` and scan docker-archive:image.tar, or `buildah push " + name +
                    " oci:DIR` and scan oci:DIR (or scan docker-daemon:" + name +
                    " with podman's Docker API: podman system service)");
}

}  // namespace

const std::vector<Transport>& Transports() {
  static const std::vector<Transport> kTransports = {
      {"oci", "oci:PATH[:REF]", "an OCI image layout directory", LoadOci, IsOciLayout},
      {"oci-archive", "oci-archive:PATH[:REF]", "a tar of an OCI image layout", LoadOciArchive,
       IsOciArchive},
      {"docker-archive", "docker-archive:PATH[:REF]",
       "a `docker save` tarball (legacy or OCI form)", LoadDockerArchive, IsDockerArchive},
      {"dir", "dir:PATH", "an unpacked root file system, read as one layer", LoadDir},
      {"docker-daemon", "docker-daemon:NAME[:TAG]",
       "an image of the local Docker Engine or podman's Docker API (DOCKER_HOST)",
       LoadDockerDaemon},
      {"containers-storage", "containers-storage:NAME",
       "podman/buildah local storage: not read; export it (the error says how)",
       LoadContainersStorage},
      {"docker", "docker://REF or REF", "an image in a registry", LoadRegistry},
  };
  return kTransports;
}

namespace {

// A reference no registry name can be and a user means as a file: an absolute or relative path,
// or an archive's file name (a registry repository "x.tar" is possible, but never meant).
bool LooksLikePath(std::string_view r) {
  if (r.starts_with("/") || r.starts_with("./") || r.starts_with("../") || r.starts_with("~") ||
      r == "." || r == "..")
    return true;
  for (std::string_view ext : {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".oci"})
    if (r.ends_with(ext)) return true;
  return false;
}

}  // namespace

std::pair<const Transport*, std::string> SplitReference(std::string_view reference) {
  const Transport* docker = nullptr;
  for (const Transport& t : Transports()) {
    if (t.name == "docker") docker = &t;
    if (reference.size() > t.name.size() && reference.starts_with(t.name) &&
        reference[t.name.size()] == ':') {
      std::string_view rest = reference.substr(t.name.size() + 1);
      if (t.name == "docker" && rest.starts_with("//")) rest.remove_prefix(2);
      return {&t, std::string(rest)};
    }
  }
  if (const Transport* t = RecognizePath(std::string(reference)))
    return {t, std::string(reference)};
  // What reads as a path (/x, ./x, ../x, ~/x, x.tar) is never looked up in a registry.
  if (LooksLikePath(reference)) throw util::Fatal(std::string(reference) + ": no such file");
  return {docker, std::string(reference)};
}

std::string WithoutTagOrDigest(std::string_view reference) {
  auto [transport, rest] = SplitReference(reference);
  std::string_view prefix = reference.substr(0, reference.size() - rest.size());
  bool named = transport->name == "docker" || transport->name == "docker-daemon";
  if (named) rest = rest.substr(0, rest.find('@'));
  if (named || transport->syntax.find("[:REF]") != std::string_view::npos) {
    size_t colon = rest.rfind(':'), slash = rest.rfind('/');
    if (colon != std::string::npos && (slash == std::string::npos || colon > slash))
      rest.resize(colon);
  }
  return std::string(prefix) + rest;
}

const Transport* RecognizePath(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return nullptr;
  for (const Transport& t : Transports())
    if (t.recognizes && t.recognizes(path)) return &t;
  return nullptr;
}

std::string TransportSyntaxList() {
  std::string out;
  for (const Transport& t : Transports()) out += (out.empty() ? "" : ", ") + std::string(t.syntax);
  return out;
}

Image Load(const std::string& reference, const LoadOptions& options) {
  if (reference.empty())
    throw util::Fatal("no image given; expected one of: " + TransportSyntaxList());
  auto [transport, rest] = SplitReference(reference);
  if (rest.empty())
    throw util::Fatal("'" + reference + "' names no image; expected " +
                      std::string(transport->syntax));
  Image img = transport->load(rest, options);
  img.reference = reference;
  img.transport = std::string(transport->name);
  return img;
}

KnownManifest ResolveRegistryManifest(const std::string& reference, const LoadOptions& options) {
  auto [transport, rest] = SplitReference(reference);
  if (transport->name != "docker")
    throw util::Fatal("'" + reference + "' is not a registry reference");
  nlohmann::json doc;
  KnownManifest out;
  Descriptor d = FindManifest(*OpenRegistry(rest, BoundedRegistryOptions(options)),
                              options.platform, doc, &out.bytes);
  out.digest = d.digest;
  out.media_type = d.media_type;
  return out;
}

}  // namespace imgcheck::image

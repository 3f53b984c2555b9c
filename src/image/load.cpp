// Load(): reference -> transport -> manifest -> config -> layers (verified) -> merged tree.
#include <nlohmann/json.hpp>

#include "image/docker_daemon.h"
#include "image/image.h"
#include "image/layer.h"
#include "image/manifest.h"
#include "image/merge.h"
#include "image/read_layers.h"
#include "image/sources.h"
#include "image/stream.h"
#include "image/transports.h"
#include "util/error.h"
#include "util/sha256.h"

namespace imgcheck::image {

namespace {

constexpr int kMaxIndexDepth = 4;  // an index may point at an index, but not forever

// Checks a small blob against its descriptor.
void Verify(const Descriptor& d, std::string_view bytes, const std::string& what) {
  if (d.size >= 0 && static_cast<uint64_t>(d.size) != bytes.size())
    throw util::Fatal(what + ": size mismatch: descriptor says " + std::to_string(d.size) +
                      " bytes, blob has " + std::to_string(bytes.size()));
  if (d.digest.empty()) return;
  std::string got = util::Sha256Digest(bytes);
  if (got != d.digest) throw util::Fatal(what + ": digest mismatch: content is " + got);
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
LayerContents ReadVerified(Source& src, const Descriptor& d, const std::string& diff_id, int index,
                           const LoadOptions& options, const TrackBlob& track) {
  std::string what = src.Describe() + ": layer " + std::to_string(index) +
                     (d.digest.empty() ? " (" + d.location + ")" : " " + d.digest);
  if (const PrereadLayer* pre = src.Preread(d)) return CheckPreread(*pre, d, diff_id, index, what);
  std::unique_ptr<BlobReader> blob = track(src.OpenBlob(d));
  HashingReader stored(*blob);
  LayerContents contents;
  std::string got;
  auto check_digest = [&] {
    got = stored.Finish();
    if (!d.digest.empty() && got != d.digest)
      throw util::Fatal(what + ": digest mismatch: content is " + got);
  };
  try {
    contents = ReadLayer(stored, index, options.capture);
  } catch (const util::Fatal& e) {
    try {
      check_digest();
    } catch (const util::Fatal& mismatch) {
      if (std::string_view(mismatch.what()).find("digest mismatch") != std::string_view::npos)
        throw;
    }
    throw util::Fatal(what + ": " + e.what());
  }
  check_digest();
  if (d.size >= 0 && stored.count() != static_cast<uint64_t>(d.size))
    throw util::Fatal(what + ": size mismatch: descriptor says " + std::to_string(d.size) +
                      " bytes, blob has " + std::to_string(stored.count()));
  if (contents.diff_id != diff_id)
    throw util::Fatal(what + ": diff_id mismatch: config says " + diff_id +
                      ", uncompressed content is " + contents.diff_id);
  contents.digest = got;
  contents.compressed_size = stored.count();
  return contents;
}

void LoadFromSource(Source& src, const std::string& transport, const LoadOptions& options,
                    Image& img) {
  Descriptor d = src.Root();
  nlohmann::json doc;
  for (int depth = 0;; ++depth) {
    if (depth > kMaxIndexDepth) throw util::Fatal(src.Describe() + ": indexes nested too deeply");
    std::string what =
        src.Describe() + ": " + (d.digest.empty() ? d.location : "manifest " + d.digest);
    std::string bytes = src.ReadBlob(d, kMaxManifestBytes);
    Verify(d, bytes, what);
    doc = ParseJson(bytes, kMaxManifestBytes, what);
    if (KindOf(d.media_type, doc, what) == DocumentKind::kManifest) {
      img.manifest_digest = d.digest;
      break;
    }
    d = SelectPlatform(ParseIndex(doc, what), options.platform, what).descriptor;
  }
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
  std::string config_bytes = src.ReadBlob(m.config, kMaxConfigBytes);
  Verify(m.config, config_bytes, cwhat);
  ParsedConfig pc = ParseConfig(ParseJson(config_bytes, kMaxConfigBytes, cwhat), cwhat);
  img.config_digest = m.config.digest;
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
                      static_cast<uint64_t>(std::max<int64_t>(0, m.layers[i].size))});
    img.layers.push_back(std::move(layer));
  }
  // Layers are read on up to options.jobs threads (or found in the cache), merged in order here.
  std::unique_ptr<LayerCache> cache = OpenLayerCache(options);
  ReadLayers(
      jobs, SpeedOptions(options, cache.get()),
      [&](const LayerJob& j, const TrackBlob& track) {
        return ReadVerified(src, m.layers[j.index], pc.diff_ids[j.index], j.index, options, track);
      },
      [&](const LayerJob& j, LayerContents& contents) {
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
  return FromSource(OpenOciLayout(OpenTarStore(path), ref, "oci-archive:" + std::string(rest)),
                    "oci-archive", options);
}

Image LoadDockerArchive(std::string_view rest, const LoadOptions& options) {
  auto [path, ref] = PathAndRef(rest);
  return FromSource(
      OpenDockerArchive(OpenTarStore(path), ref, "docker-archive:" + std::string(rest)),
      "docker-archive", options);
}

Image LoadRegistry(std::string_view rest, const LoadOptions& options) {
  return FromSource(OpenRegistry(std::string(rest), options.registry), "docker", options);
}

Image LoadDir(std::string_view rest, const LoadOptions& options) {
  Image img;
  LayerContents c = ReadDirectory(std::string(rest), options.capture);
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
  return FromSource(OpenDockerArchive(OpenDaemonStore(rest, options.capture), "",
                                      "docker-daemon:" + std::string(rest)),
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
      {"oci", "oci:PATH[:REF]", "an OCI image layout directory", LoadOci},
      {"oci-archive", "oci-archive:PATH[:REF]", "a tar of an OCI image layout", LoadOciArchive},
      {"docker-archive", "docker-archive:PATH[:REF]",
       "a `docker save` tarball (legacy or OCI form)", LoadDockerArchive},
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

std::pair<const Transport*, std::string> SplitReference(std::string_view reference) {
  const Transport* docker = nullptr;
  for (const Transport& t : Transports()) {
    if (t.name == "docker") docker = &t;
    if (reference.size() > t.name.size() && reference.substr(0, t.name.size()) == t.name &&
        reference[t.name.size()] == ':') {
      std::string_view rest = reference.substr(t.name.size() + 1);
      if (t.name == "docker" && rest.substr(0, 2) == "//") rest.remove_prefix(2);
      return {&t, std::string(rest)};
    }
  }
  return {docker, std::string(reference)};
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

}  // namespace imgcheck::image

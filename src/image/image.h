// An image as the later stages see it: its configuration, its layers, and the merged tree.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "image/capture.h"
#include "image/registry.h"
#include "image/tree.h"
#include "util/error.h"
#include "util/limits.h"

namespace imgcheck::image {

struct Layer {
  int index = 0;
  std::string digest;   ///< blob digest as stored ("sha256:..."); dir: transport has none
  std::string diff_id;  ///< digest of the uncompressed tar
  std::string media_type;
  uint64_t compressed_size = 0;
  uint64_t size = 0;       ///< uncompressed bytes
  std::string created_by;  ///< the config history line that created this layer
  int added = 0, changed = 0,
      deleted = 0;  ///< paths added, overwritten, removed vs. the layers below
};

/// One entry of the config's history: what an instruction of the build recorded.
struct HistoryEntry {
  std::string created_by;
  bool empty_layer = false;  ///< made no layer (ENV, LABEL, ...)
};

struct Config {
  std::string os, architecture, variant;
  std::vector<std::string> env;  ///< "KEY=value", as in the config
  std::map<std::string, std::string> labels;
  std::vector<std::string> entrypoint, cmd;
  std::string working_dir, user;
  std::vector<HistoryEntry> history;  ///< every entry, empty_layer ones included, in order
};

struct Image {
  std::string reference;        ///< as the user wrote it
  std::string transport;        ///< "oci", "oci-archive", "docker-archive", "dir", "docker"
  std::string manifest_digest;  ///< empty for dir:; the config digest for a legacy docker save
  std::string config_digest;
  Config config;
  std::vector<Layer> layers;
  Tree tree;
  std::vector<util::Diagnostic> diagnostics;  ///< recoverable problems found while reading
};

/// An image manifest fetched before, with its digest (serve's resolver fetches it to learn the
/// digest a tag names): a later reading of that digest starts from these bytes instead of
/// fetching them again, and still verifies them against the digest.
class SharedLayers;  // layer_cache.h

struct KnownManifest {
  std::string digest;  ///< "sha256:..."
  std::string media_type;
  std::string bytes;
};

struct LoadOptions {
  std::string platform = "linux/amd64";  ///< os/arch[/variant], for indexes
  CapturePolicy capture;                 ///< what to keep of file contents; may be empty
  DigestRule digests;        ///< whose MD5 the readings take (capture.h); empty: nobody's
  RegistryOptions registry;  ///< for registry references
  util::Limits limits;       ///< bounds on what the image may make imgcheck do
  // Speed (read_layers.h, layer_cache.h). The defaults suit a library caller: one thread, no
  // cache on disk, nothing on stderr; the command line asks for more.
  int jobs = 1;            ///< layers read at once
  bool use_cache = false;  ///< read and store layer readings in the layer cache
  std::string cache_dir;   ///< the cache's directory; empty: DefaultCacheDir()
  uint64_t cache_max_bytes = uint64_t{1} << 30;  ///< bound of the cache; LRU entries pruned
  /// Identity of `capture` (part of each cache key; ignored without a capture policy): change
  /// it whenever what the policy keeps changes. With a policy but no identity, no cache is used.
  std::string capture_id;
  /// Non-null: a tier behind the cache that other machines share (layer_cache.h; serve's facts
  /// store). Used even with use_cache off, for readings and image configs.
  std::shared_ptr<SharedLayers> shared_layers;
  /// Whether a reading found in a cache still needs its blob in the source, as big as its
  /// descriptor says (a HEAD per layer on a registry). The server's re-judgements turn it off:
  /// the manifest it fetched names the blobs, and a pull that lacks one fails on the node
  /// anyway; a re-judgement then asks the registry for the manifest only.
  bool stat_cached = true;
  bool progress = false;  ///< progress line on stderr when it is a terminal
  /// Null: every layer. Otherwise the layers (by index) to read: the others are neither read
  /// nor merged, so the tree has only the accepted layers' files. For a caller after the files
  /// of some layers only (the probe, extracting libraries the full tree says those layers hold).
  /// A dir: image's one layer is always read.
  std::function<bool(int layer)> read_layer;
  /// Non-empty: the manifest this reading must reach ("sha256:..."), as an earlier reading of
  /// the same reference found it; another one (a tag moved, a layout rewritten) is a
  /// util::Fatal. For a caller reading an image again (the probe extracting libraries).
  std::string manifest_digest;
  /// Non-null: the image manifest of a registry reference pinned to known_manifest->digest
  /// ("host/repo@sha256:..."), already fetched: the reading does not fetch it again.
  std::shared_ptr<const KnownManifest> known_manifest;
};

/// Reads, verifies and merges an image named like skopeo does ("oci:PATH[:REF]", "dir:PATH", ...).
/// Throws util::Fatal with a one-line message when the image cannot be read or verified.
Image Load(const std::string& reference, const LoadOptions& options);

/// The image manifest Load would read for registry `reference` (through an index to
/// options.platform), verified, with its digest: manifests only are fetched. Throws util::Fatal
/// as Load does.
KnownManifest ResolveRegistryManifest(const std::string& reference, const LoadOptions& options);

}  // namespace imgcheck::image

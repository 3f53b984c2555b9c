// The per-layer cache: what reading a layer produced (its entries and the captured parts of its
// files), kept on disk under a key naming everything that reading depends on, so that a layer
// seen before, in this image or any other, is never decompressed again.
//
// Layout: <dir>/layers/<key>, one file per layer reading. An entry is never trusted blindly: it
// carries a CRC-64 of its payload and the digests it was stored for, is parsed bounds-checked,
// and is discarded (deleted, then rebuilt by the caller) when anything does not match. The
// checksum is against damage (a full disk, a crash, a stray write): whoever can write the
// directory can write any checksum, so a cryptographic one would guard nothing more, and it cost
// a warm scan of a CUDA image more time than the rest of reading its entries. Writers
// go through a temporary file and rename(2), so concurrent imgcheck processes see whole entries
// or none. The directory is bounded by size: Prune() removes the least recently used entries
// (by mtime; a hit touches its entry).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "image/layer.h"

namespace imgcheck::image {

/// Bumped whenever ReadLayer, LayerContents or the entry encoding change what an entry means;
/// it is part of every key, so older entries simply stop matching (and age out).
// 2: a captured file's MD5; 3: digest_wanted; 4: its SHA-256 (SBOM readings); 5: the payload's
// checksum a CRC-64, not a SHA-256; 6: a captured file's annex (elf: symbol name hashes and
// binding keys)
inline constexpr uint32_t kLayerCacheVersion = 6;
/// Default bound of <dir>/layers. Entries hold only captured parts: a CUDA layer of gigabytes
/// makes an entry of a few megabytes, so this keeps hundreds of layers.
inline constexpr uint64_t kDefaultCacheMaxBytes = uint64_t{1} << 30;

/// $XDG_CACHE_HOME/imgcheck, else $HOME/.cache/imgcheck (relative values are ignored, as the XDG
/// base directory spec says); empty when neither is usable.
std::filesystem::path DefaultCacheDir();

/// What a layer's reading depends on, like Trivy's cache key.
struct LayerKey {
  std::string digest;      ///< the blob digest the manifest names; empty for a blob without one
                           ///< (a legacy docker-archive's layer.tar): the diff_id names it
  std::string diff_id;     ///< the diff_id the config names for it
  std::string capture_id;  ///< identity of the capture policy (changes when what it keeps does)
  /// Hex SHA-256 over kLayerCacheVersion and the fields above: the entry's file name.
  std::string Hex() const;
};

/// The entry encoding: header (magic, version, payload length, CRC-64 of the payload), then the
/// payload (digests, sizes, diagnostics, entries with their captured extents), little-endian.
/// Diagnostics that named the layer are stored without its index.
std::string SerializeLayer(const LayerContents& contents, int layer);
/// Parses SerializeLayer's output, giving diagnostics the index `layer`. Nullopt when anything
/// is off: magic, version, length, checksum, a field past the end, a bad enum, trailing bytes.
std::optional<LayerContents> ParseLayer(std::string_view bytes, int layer);

/// A tier behind the directory that processes on other machines share (serve --redis: the facts
/// store), so that a reading made by one replica saves every other the blob. Values are named
/// "layer:<LayerKey::Hex()>" (SerializeLayer's encoding) and "config:<digest>" (an image config,
/// which its digest verifies). The tier vouches for who wrote a value (serve seals them); the
/// reader still checks what it holds, and hands back (Discard) what fails. Thread-safe.
class SharedLayers {
 public:
  virtual ~SharedLayers() = default;
  /// The value stored under `name`, nullopt when none (or the tier fails: it only saves time).
  virtual std::optional<std::string> Get(const std::string& name) = 0;
  virtual void Put(const std::string& name, std::string_view value) = 0;
  /// A value Get gave that failed the reader's checks (`why`): counted, and not used.
  virtual void Discard(const std::string& name, std::string_view why) = 0;
};

class LayerCache {
 public:
  /// Uses (and creates, mode 0700) `dir`/layers. A directory that cannot be created leaves
  /// the cache disabled: lookups miss and stores do nothing (the cache only saves time).
  /// With `shared`, a local miss is looked up there (and kept locally), and stores go to both.
  explicit LayerCache(const std::filesystem::path& dir, uint64_t max_bytes = kDefaultCacheMaxBytes,
                      std::shared_ptr<SharedLayers> shared = nullptr);

  bool enabled() const { return enabled_ || shared_; }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path EntryPath(const LayerKey& key) const { return dir_ / key.Hex(); }

  /// The stored reading for `key`, with its diagnostics given index `layer`; a hit refreshes
  /// the entry's mtime. A corrupt or mismatching entry is deleted and reported as a miss.
  /// Thread-safe.
  std::optional<LayerContents> Lookup(const LayerKey& key, int layer) const;
  /// Stores a verified reading (its digest and diff_id must be the key's). Written to a
  /// temporary file, fsync'ed and renamed into place; failures are ignored. Thread-safe.
  void Store(const LayerKey& key, const LayerContents& contents, int layer) const;
  /// Deletes least recently used entries until the entries total at most max_bytes, and
  /// temporary files abandoned by crashed writers. Returns the bytes freed.
  uint64_t Prune() const;

 private:
  std::filesystem::path dir_;
  uint64_t max_bytes_;
  bool enabled_ = false;  ///< the directory
  std::shared_ptr<SharedLayers> shared_;

  std::optional<LayerContents> LookupShared(const LayerKey& key, int layer) const;
  void StoreLocal(const LayerKey& key, const std::string& data) const;
};

}  // namespace imgcheck::image

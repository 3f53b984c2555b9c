// One layer read on its own, before merging: what its tar says, entry by entry.
// Reading is independent per layer (so layers can be read on threads and their results cached);
// only Merge() (merge.h) depends on the layers below.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "image/budget.h"
#include "image/capture.h"
#include "image/source.h"
#include "image/tree.h"
#include "util/error.h"
#include "util/sparse_file.h"

namespace imgcheck::image {

enum class EntryKind : uint8_t {
  kFile,
  kDirectory,
  kSymlink,
  kHardlink,
  kCharDevice,
  kBlockDevice,
  kFifo,
  kWhiteout,  ///< `.wh.NAME`: `path` is the path it deletes
  kOpaque,    ///< `.wh..wh..opq`: `path` is the directory made opaque
};

struct LayerEntry {
  std::string path;  ///< absolute, normalised (".." clamped at "/")
  EntryKind kind = EntryKind::kFile;
  uint32_t mode = 0;        ///< permission bits
  uint64_t size = 0;        ///< regular files
  std::string link_target;  ///< symlink: as stored; hard link: the normalised linked path
  std::shared_ptr<const util::SparseFile> content;  ///< what the capture policy kept, if any
  /// A regular file its reading's DigestPlan wanted: content (when kept) has its MD5, unless
  /// the file is sparse or ended short. A reading whose plan missed a path the layers below
  /// state is read again (read_layers.h).
  bool digest_wanted = false;
};

/// A layer's entries in tar order, with the problems found reading them.
struct LayerContents {
  std::vector<LayerEntry> entries;
  std::vector<util::Diagnostic> diagnostics;
  uint64_t compressed_size = 0;  ///< stored bytes read
  uint64_t size = 0;             ///< uncompressed bytes
  std::string digest;            ///< "sha256:..." of the stored bytes as read
  std::string diff_id;           ///< "sha256:..." of the uncompressed tar as read
};

class HashingReader;

/// A layer blob read as it streamed past (digest, compressed_size and diff_id filled in,
/// diagnostics tied to no layer yet), or the reason it could not be read.
struct PrereadLayer {
  LayerContents contents;
  std::string error;  ///< ReadLayer's message; contents.digest still covers every byte
};

/// Reads one layer blob (gzip, zstd or plain tar, detected by magic bytes) from `blob`, hashing
/// the uncompressed stream for the diff_id (`blob` hashes the stored bytes; for a plain tar that
/// digest is the diff_id, and nothing is hashed twice). The caller compares digest/diff_id with
/// what the manifest and config promise. `layer` is the index diagnostics carry. Throws
/// util::Fatal (message without location; the caller adds it) on corrupt compression or a
/// corrupt tar, and when the image's `budget` is exceeded (entries, names, captured bytes, the
/// zstd window).
/// The files `digests` wants get their MD5 taken (and digest_wanted set).
LayerContents ReadLayer(HashingReader& blob, int layer, const CapturePolicy& capture,
                        ImageBudget& budget, const DigestPlan& digests = {});

/// An unpacked root file system on the host as a single layer (the dir: transport). Symlinks
/// are recorded, never followed; nothing outside `root` is read; holes of sparse files are
/// skipped, not read.
LayerContents ReadDirectory(const std::filesystem::path& root, const CapturePolicy& capture,
                            ImageBudget& budget);

}  // namespace imgcheck::image

// What later stages keep of file contents while a layer streams past.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "util/sparse_file.h"

namespace imgcheck::image {

/// Receives one regular file's bytes, in order, as its layer streams, and keeps what it wants.
/// A capturer never holds a whole large file: it keeps byte ranges in a SparseFile.
class Capturer {
 public:
  virtual ~Capturer() = default;
  /// Next chunk of the file. Returns false when it wants no more of this file.
  virtual bool Feed(std::string_view chunk) = 0;
  /// The next `n` bytes are a hole of a sparse file (zeros). The default feeds the zeros; a
  /// capturer that wants only some ranges skips the rest, so that a petabyte of hole costs
  /// nothing. Returns false when it wants no more of this file.
  virtual bool Skip(uint64_t n);
  /// End of file (or after Feed returned false): what was kept. `size` is the file's full size.
  virtual util::SparseFile Finish(uint64_t size) = 0;
};

/// Chooses per regular file whether (non-null) and how its bytes are captured. Called from the
/// threads that read layers, so it must be thread-safe. `path` is normalised and absolute;
/// `mode` holds the permission bits (07777).
using CapturePolicy =
    std::function<std::unique_ptr<Capturer>(std::string_view path, uint64_t size, uint32_t mode)>;

/// Keeps the first `limit` bytes (the whole file when it is no longer): for small metadata files.
std::unique_ptr<Capturer> CapturePrefix(uint64_t limit);

/// Keeps what `inner` keeps and hashes every byte on the way (MD5, streamed: nothing more is
/// held), so the result's md5() is the whole file's; left empty when the stream ended short.
std::unique_ptr<Capturer> CaptureWithMd5(std::unique_ptr<Capturer> inner);

}  // namespace imgcheck::image

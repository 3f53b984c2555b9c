// The streaming capturer: what a later stage keeps of one file's bytes while its layer streams
// past. The image stage feeds capturers; elf and catalog write them.
#pragma once

#include <cstdint>
#include <string_view>

#include "util/sparse_file.h"

namespace imgcheck::util {

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
  virtual SparseFile Finish(uint64_t size) = 0;
};

}  // namespace imgcheck::util

// The elf stage's annex to a captured file (util::SparseFile::annex): what the capturer derived
// from bytes it did not keep. Internal to the elf stage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace imgcheck::elf {

/// A NUL-terminated string of the file, hashed as it streamed past: [offset, offset + length)
/// followed by a NUL, NameHash of those bytes.
struct StringHash {
  uint64_t offset = 0;
  uint32_t length = 0;
  uint64_t hash = 0;
};

struct Annex {
  bool has_keys = false;
  std::vector<uint64_t> keys;       ///< ElfInfo::export_keys: sorted, unique
  std::vector<StringHash> strings;  ///< sorted by offset, unique offsets
  /// The string hash at `offset`, or null.
  const StringHash* Find(uint64_t offset) const;
};

/// Little-endian: "ELFA", u32 flags (1: keys present), u32 count, keys (u64), u32 count,
/// strings (u64 offset, u32 length, u64 hash).
std::string EncodeAnnex(const Annex& annex);
/// Nullopt when anything is off (it came through a cache: checked, never trusted): the magic,
/// a count past the end, keys or offsets out of order, trailing bytes.
std::optional<Annex> DecodeAnnex(std::string_view bytes);

}  // namespace imgcheck::elf

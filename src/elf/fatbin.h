// The CUDA fat binary container (.nv_fatbin): shared by Parse and the streaming capturer.
//
// NVIDIA does not document the layout; this follows fatbinary_section.h from the CUDA toolkit
// (fatBinaryHeader: magic 0xBA55ED50, version 1, headerSize 16, fatSize) and the reverse-engineered
// entry header used by cuobjdump-compatible tools (RWTH-ACS/cricket fatbin-decompress,
// nvopen-tools FORMAT_SPECIFICATION), checked here against cuDNN 9 and nvcc 13 output:
//   container: u32 magic, u16 version, u16 header_size, u64 fat_size (bytes of entries after it)
//   entry:     u16 kind (1 PTX, 2 ELF), u16 ?, u32 header_size, u64 payload_size, u32 ?, u32 ?,
//              u16 minor, u16 major, u32 arch, u32 name_off, u32 name_len, u64 flags, ...
//              next entry = entry + header_size + payload_size; containers follow each other,
//              8-byte aligned. Host data, so always little-endian.
// The host side also has a wrapper per translation unit in .nvFatBinSegment (__fatBinC_Wrapper_t:
// magic 0x466243B1, version, pointer to the container); its pointer is a relocated address, so
// the containers are found through .nv_fatbin or their own magic instead.
// Internal to the elf stage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "elf/elf.h"
#include "elf/parse.h"
#include "util/sparse_file.h"

namespace imgcheck::elf::fatbin {

inline constexpr uint32_t kMagic = 0xBA55ED50;
inline constexpr uint64_t kHeaderSize = 16;
/// Bytes of an entry header that hold every field we read (the rest is an extension).
inline constexpr uint64_t kEntryHeaderSize = 64;

/// fat_size of the container whose header is `header` (16 bytes), or nullopt when it is not one.
std::optional<uint64_t> ReadContainerHeader(std::string_view header);

struct EntryHeader {
  uint16_t kind = 0;
  uint32_t header_size = 0;
  uint64_t payload_size = 0;
  FatbinEntry entry;
  /// Offset of the next entry relative to this one, nullopt when the sizes overflow.
  std::optional<uint64_t> Advance() const;
};
/// Decodes the first kEntryHeaderSize bytes of an entry; nullopt when they cannot be one.
std::optional<EntryHeader> ReadEntryHeader(std::string_view bytes);

/// Collects the entries of every container in [begin, end) of `file` (the .nv_fatbin section,
/// or one container found by its magic). Uncaptured or inconsistent parts go to `problems`.
/// Returns the offset where the walk stopped. Ranges read are appended to `touched` (if set).
uint64_t Walk(const util::SparseFile& file, uint64_t begin, uint64_t end,
              std::vector<FatbinEntry>& out, std::vector<std::string>& problems,
              RangeList* touched);

/// Finds containers by their magic at 8-byte aligned offsets in the captured extents (for files
/// whose section headers were not captured) and walks each.
void Scan(const util::SparseFile& file, std::vector<FatbinEntry>& out,
          std::vector<std::string>& problems, RangeList* touched);

}  // namespace imgcheck::elf::fatbin

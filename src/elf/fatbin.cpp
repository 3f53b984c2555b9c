#include "elf/fatbin.h"

#include <algorithm>
#include <cstring>

#include "elf/format.h"
#include "util/reader.h"

namespace imgcheck::elf::fatbin {
namespace {

constexpr uint16_t kKindPtx = 1, kKindElf = 2;
// Entry flags: payload compressed (LZ4 in CUDA 11/12, zstd from CUDA 12.8 on).
constexpr uint64_t kFlagCompressedLz4 = 0x2000, kFlagCompressedZstd = 0x8000;
// Bound on an entry header; real ones are 64, 80, 104 or 112 bytes.
constexpr uint32_t kMaxEntryHeader = 4096;

uint64_t Align8(uint64_t v) { return v + ((8 - v % 8) % 8); }

}  // namespace

std::optional<uint64_t> ReadContainerHeader(std::string_view header) {
  util::Reader r(header);
  auto magic = r.Read<uint32_t>();
  auto version = r.Read<uint16_t>();
  auto header_size = r.Read<uint16_t>();
  auto fat_size = r.Read<uint64_t>();
  if (!fat_size || *magic != kMagic || *version != 1 || *header_size != kHeaderSize)
    return std::nullopt;
  return *fat_size;
}

std::optional<uint64_t> EntryHeader::Advance() const {
  return util::CheckedAdd(header_size, payload_size);
}

std::optional<EntryHeader> ReadEntryHeader(std::string_view bytes) {
  util::Reader r(bytes);
  EntryHeader h;
  auto kind = r.Read<uint16_t>();
  r.Skip(2);
  auto header_size = r.Read<uint32_t>();
  auto payload_size = r.Read<uint64_t>();
  r.Skip(8);
  auto minor = r.Read<uint16_t>();
  auto major = r.Read<uint16_t>();
  auto arch = r.Read<uint32_t>();
  r.Skip(8);
  auto flags = r.Read<uint64_t>();
  if (!flags || *header_size < kEntryHeaderSize || *header_size > kMaxEntryHeader ||
      *header_size % 8 != 0)
    return std::nullopt;
  h.kind = *kind;
  h.header_size = *header_size;
  h.payload_size = *payload_size;
  h.entry.kind = *kind == kKindPtx ? FatbinEntry::Kind::kPtx : FatbinEntry::Kind::kCubin;
  h.entry.sm = *arch;
  h.entry.version_major = *major;
  h.entry.version_minor = *minor;
  h.entry.compressed = (*flags & (kFlagCompressedLz4 | kFlagCompressedZstd)) != 0;
  return h;
}

uint64_t Walk(const util::SparseFile& file, uint64_t begin, uint64_t end,
              std::vector<FatbinEntry>& out, std::vector<std::string>& problems,
              RangeList* touched) {
  auto touch = [touched](uint64_t offset, uint64_t len) {
    if (touched) touched->emplace_back(offset, len);
  };
  uint64_t pos = begin;
  while (pos < end && end - pos >= kHeaderSize && out.size() < format::kMaxEntries &&
         problems.size() < format::kMaxProblems) {
    auto header = file.View(pos, kHeaderSize);
    if (!header) {
      problems.push_back("fatbin container header at offset " + format::Hex(pos) + " not captured");
      return pos;
    }
    touch(pos, kHeaderSize);
    auto fat_size = ReadContainerHeader(*header);
    if (!fat_size) {
      // Zero padding may end a section; anything else where a container should start is not.
      if (header->find_first_not_of('\0') != std::string_view::npos)
        problems.push_back("no fatbin container at offset " + format::Hex(pos));
      return pos;
    }
    auto container_end = util::CheckedAdd(pos + kHeaderSize, *fat_size);
    if (!container_end || *container_end > end) {
      problems.push_back("fatbin container at offset " + format::Hex(pos) +
                         " overruns its section");
      return pos;
    }
    uint64_t entry = pos + kHeaderSize;
    while (entry < *container_end && out.size() < format::kMaxEntries) {
      auto bytes = file.View(entry, kEntryHeaderSize);
      if (!bytes) {
        problems.push_back("fatbin entry header at offset " + format::Hex(entry) + " not captured");
        break;
      }
      touch(entry, kEntryHeaderSize);
      auto h = ReadEntryHeader(*bytes);
      auto advance = h ? h->Advance() : std::nullopt;
      auto next = advance ? util::CheckedAdd(entry, *advance) : std::nullopt;
      if (!next || *next > *container_end) {
        problems.push_back("corrupt fatbin entry header at offset " + format::Hex(entry));
        break;
      }
      if (h->kind == kKindPtx || h->kind == kKindElf) out.push_back(h->entry);
      entry = *next;
    }
    pos = Align8(*container_end);
  }
  return pos;
}

void Scan(const util::SparseFile& file, std::vector<FatbinEntry>& out,
          std::vector<std::string>& problems, RangeList* touched) {
  uint64_t resume = 0;  // containers already walked end here; their payloads are not scanned
  for (const auto& extent : file.extents()) {
    const std::string_view bytes = extent.bytes;
    uint64_t first = std::max(Align8(extent.offset), resume);
    for (uint64_t off = first;
         off >= extent.offset && off - extent.offset + kHeaderSize <= bytes.size(); off += 8) {
      uint32_t word;
      std::memcpy(&word, bytes.data() + (off - extent.offset), sizeof word);
      if (word != kMagic) continue;  // fast reject (x86-64 and aarch64 hosts are little-endian)
      auto fat_size = ReadContainerHeader(bytes.substr(off - extent.offset, kHeaderSize));
      auto end = fat_size ? util::CheckedAdd(off + kHeaderSize, *fat_size) : std::nullopt;
      if (!end || *end > file.size()) continue;
      Walk(file, off, *end, out, problems, touched);
      resume = Align8(*end);
      if (resume - 8 < off) break;  // cannot happen (end > off); keeps the loop finite regardless
      off = resume - 8;
    }
  }
}

}  // namespace imgcheck::elf::fatbin

// The streaming ELF capturer. The file passes once, in order; what Parse needs is recognised on
// the way and kept:
//  - the first bytes of the file up to the dynamic section, at most kPrefixCap: with GNU ld,
//    gold and lld the ELF and program headers, notes, hash tables, .dynsym, .dynstr and the
//    version tables all sit at the start, before the dynamic section that points to them;
//  - PT_DYNAMIC, PT_NOTE and PT_INTERP as the stream passes them;
//  - once the dynamic section is known, every table it points to that still lies ahead (patchelf
//    and some NVIDIA libraries put .dynstr/.dynsym after it), up to the end of its PT_LOAD;
//  - the section header table and the kShstrWindow bytes before it (.shstrtab sits there), so the
//    .nv_fatbin section can be found;
//  - the header of every fatbin container (found by its magic at 8-byte aligned offsets) and the
//    header of each of its entries, never their payloads.
// Finish() then runs Parse over what was kept, recording the ranges it reads, and keeps only those.
//
// Memory bound per capturer: while streaming at most kBudget (40 MiB) of kept bytes, plus the
// bookkeeping of at most kMaxFatbinRanges small ranges (about 4 MiB); 44 MiB in the worst case,
// and real libraries stay far below (libcublasLt.so.13, 540 MB: 16 MiB peak, the prefix). After
// Finish only the bytes Parse reads remain (headers, dynamic tables, fatbin headers: 437 KB of
// libcublasLt.so.13, 0.08%).
#include <algorithm>
#include <cstring>
#include <string>

#include "elf/elf.h"
#include "elf/fatbin.h"
#include "elf/format.h"
#include "elf/parse.h"
#include "util/reader.h"

namespace imgcheck::elf {
namespace {

constexpr uint64_t kPrefixCap = 16u << 20;
constexpr uint64_t kTableCap = 16u << 20;
constexpr uint64_t kSmallCap = 1u << 20;  // PT_DYNAMIC, PT_NOTE, PT_INTERP, section headers
constexpr uint64_t kShstrWindow = 64u << 10;
constexpr uint64_t kBudget = 40u << 20;
/// Fatbin container and entry headers followed at most (libcublasLt.so.13 has about 8,500).
constexpr uint64_t kMaxFatbinRanges = 1u << 15;
/// Below this many kept bytes Finish keeps everything: trimming would not pay for the re-parse.
constexpr uint64_t kTrimThreshold = 256u << 10;

class ElfCapturer : public util::Capturer {
 public:
  bool Feed(std::string_view chunk) override {
    if (stopped_) return false;
    base_ = end_;
    end_ += chunk.size();
    if (base_ < 4 && !CheckMagic(chunk)) return false;
    ScanForFatbin(chunk);
    // Hooks may append ranges that start inside this chunk, so index (not iterate) the vector.
    for (size_t i = 0; i < ranges_.size(); ++i) {
      Range& r = ranges_[i];
      uint64_t have = r.begin + r.bytes.size();
      if (have >= r.end || have >= end_ || have < base_) continue;
      uint64_t take = std::min(r.end, end_) - have;
      r.bytes.append(chunk.substr(have - base_, take));
      if (r.begin + r.bytes.size() == r.end && r.role != Role::kPlain) Complete(i);
      if (stopped_) return false;
    }
    Compact();
    return true;
  }

  // A hole: zeros are fed only where a range still wants bytes; the rest is passed over (no
  // fatbin magic is made of zeros).
  bool Skip(uint64_t n) override {
    static const std::string kZeros(1 << 16, '\0');
    uint64_t stop = util::CheckedAdd(end_, n).value_or(UINT64_MAX);
    while (end_ < stop) {
      if (stopped_) return false;
      // The first byte of the hole some range still waits for (the magic is always checked).
      uint64_t next = end_ < 4 ? end_ : stop;
      for (const Range& r : ranges_) {
        uint64_t have = r.begin + r.bytes.size();
        if (have >= end_ && have < r.end) next = std::min(next, have);
      }
      if (next > end_) {
        end_ = next;
        continue;
      }
      if (!Feed(std::string_view(kZeros).substr(0, std::min<uint64_t>(stop - end_, kZeros.size()))))
        return false;
    }
    return !stopped_;
  }

  util::SparseFile Finish(uint64_t size) override {
    util::SparseFile all(size);
    for (auto& r : ranges_) all.Take(r.begin, std::move(r.bytes));
    for (auto& r : done_) all.Take(r.begin, std::move(r.bytes));
    ranges_.clear();
    done_.clear();
    if (all.captured_bytes() <= kTrimThreshold) return all;
    RangeList touched;
    auto parsed = ParseRecording(all, &touched);
    if (!parsed || !*parsed) return all;
    util::SparseFile kept(size);
    for (const auto& [offset, len] : touched)
      if (auto bytes = all.View(offset, len)) kept.Add(offset, *bytes);
    return kept;
  }

 private:
  enum class Role : uint8_t {
    kPlain,
    kHeader,
    kPhdrs,
    kDynamic,
    kShdrs,
    kFatbinHeader,
    kFatbinEntry
  };
  struct Range {
    uint64_t begin, end;  // wanted file range
    Role role;
    uint64_t limit;     // kFatbinEntry: end of its container
    std::string bytes;  // [begin, begin + bytes.size()) captured so far
  };

  bool CheckMagic(std::string_view chunk) {
    magic_.append(chunk.substr(0, 4 - base_));
    if (magic_.size() < 4) {
      if (ranges_.empty()) Want(0, 64, Role::kHeader);
      return true;
    }
    if (!format::IsElf(magic_)) {
      stopped_ = true;
      return false;
    }
    if (ranges_.empty()) Want(0, 64, Role::kHeader);
    return true;
  }

  /// Asks for [begin, end) as far as it is still to come (the current chunk included) and the
  /// budget allows. `prefill` holds the range's first bytes when they came in earlier chunks.
  void Want(uint64_t begin, uint64_t end, Role role, uint64_t limit = 0,
            std::string_view prefill = {}) {
    if (prefill.empty()) begin = std::max(begin, base_);
    if (begin >= end) return;
    uint64_t room = kBudget - std::min(kBudget, reserved_);
    end = std::min(end, begin + room);
    if (begin >= end || prefill.size() > end - begin) return;
    reserved_ += end - begin;
    ranges_.push_back({begin, end, role, limit, std::string(prefill)});
    ranges_.back().bytes.reserve(end - begin);  // exact: no doubling while the stream passes
  }

  /// Runs when a range with a role has been captured whole.
  void Complete(size_t index) {
    const Range r = ranges_[index];  // copy: Want() may reallocate ranges_
    switch (r.role) {
      case Role::kHeader:
        OnHeader(r.bytes);
        break;
      case Role::kPhdrs:
        OnProgramHeaders(r.bytes);
        break;
      case Role::kDynamic:
        OnDynamic(r.bytes);
        break;
      case Role::kShdrs:
        OnSectionHeaders(r);
        break;
      case Role::kFatbinHeader: {
        auto fat_size = fatbin::ReadContainerHeader(r.bytes);
        if (fat_size && *fat_size <= UINT64_MAX - r.end) WantEntry(r.end, r.end + *fat_size);
        break;
      }
      case Role::kFatbinEntry: {
        auto h = fatbin::ReadEntryHeader(r.bytes);
        auto advance = h ? h->Advance() : std::nullopt;
        if (advance && *advance <= r.limit - r.begin) WantEntry(r.begin + *advance, r.limit);
        break;
      }
      case Role::kPlain:
        break;
    }
  }

  void OnHeader(const std::string& bytes) {
    auto h = format::ReadHeader(bytes);
    if (!h) {
      // Corrupt: the header is kept for Parse to report; nothing else is worth reading.
      stopped_ = true;
      return;
    }
    header_ = *h;
    if (header_.phnum != 0) Want(header_.phoff, header_.PhdrsEnd(), Role::kPhdrs);
    if (header_.shnum != 0 && header_.ShdrsEnd() - header_.shoff <= kSmallCap)
      Want(header_.shoff - std::min(header_.shoff, kShstrWindow), header_.ShdrsEnd(), Role::kShdrs);
    // The prefix; OnProgramHeaders trims it to the dynamic section.
    prefix_index_ = ranges_.size();
    Want(0, kPrefixCap, Role::kPlain);
  }

  void OnProgramHeaders(const std::string& bytes) {
    segments_ = format::ReadSegments(header_, bytes);
    // The tables the dynamic section points to are kept as they pass only if they come before it;
    // without PT_DYNAMIC nothing past the first PT_LOAD is of use.
    std::optional<uint64_t> prefix_end;
    for (const auto& s : segments_) {
      if (s.type == format::kPtDynamic) prefix_end = s.offset;
      if (s.type == format::kPtLoad && !prefix_end)
        prefix_end = util::CheckedAdd(s.offset, s.filesz);
    }
    if (prefix_end) TrimPrefix(std::max(*prefix_end, header_.PhdrsEnd()));
    for (const auto& s : segments_) {
      uint64_t len = std::min(s.filesz, kSmallCap);
      if (s.type == format::kPtDynamic)
        Want(s.offset, s.offset + len, Role::kDynamic);
      else if (s.type == format::kPtNote || s.type == format::kPtInterp)
        Want(s.offset, s.offset + len, Role::kPlain);
    }
  }

  /// Shortens the prefix range to end at `end`, handing the difference back to the budget.
  void TrimPrefix(uint64_t end) {
    if (prefix_index_ >= ranges_.size()) return;
    Range& prefix = ranges_[prefix_index_];
    prefix_index_ = SIZE_MAX;
    end = std::max(end, prefix.begin);  // the prefix starts where the header's chunk did
    if (end >= prefix.end) return;
    reserved_ -= prefix.end - end;
    prefix.end = end;
    if (prefix.bytes.size() > end - prefix.begin) prefix.bytes.resize(end - prefix.begin);
  }

  void OnDynamic(const std::string& bytes) {
    auto t = format::LocateTables(segments_, format::ReadDynamic(header_, bytes));
    if (t.strtab) WantTable(*t.strtab, std::min(t.strsz, kTableCap));
    for (auto offset : {t.symtab, t.hash, t.gnu_hash, t.versym, t.verdef, t.verneed})
      if (offset) WantTable(*offset, kTableCap);
  }

  /// A table the dynamic section points to: `len` bytes, or to the end of its PT_LOAD segment.
  void WantTable(uint64_t offset, uint64_t len) {
    if (offset < base_) return;  // already passed: the prefix has it or it is lost
    const format::Segment* s = format::LoadSegmentAt(segments_, offset);
    if (!s) return;
    uint64_t segment_end = s->offset + s->filesz;
    Want(offset, std::min(segment_end, offset + len), Role::kPlain);
  }

  void OnSectionHeaders(const Range& r) {
    uint64_t table = header_.shoff - r.begin;
    if (table > r.bytes.size()) return;
    auto sections = format::ReadSections(header_, std::string_view(r.bytes).substr(table));
    if (header_.shstrndx >= sections.size()) return;
    const auto& names = sections[header_.shstrndx];
    if (names.offset >= base_)
      Want(names.offset, names.offset + std::min(names.size, kSmallCap), Role::kPlain);
  }

  void WantEntry(uint64_t offset, uint64_t container_end) {
    if (offset >= container_end || container_end - offset < fatbin::kEntryHeaderSize) return;
    if (++fatbin_ranges_ > kMaxFatbinRanges) return;
    Want(offset, offset + fatbin::kEntryHeaderSize, Role::kFatbinEntry, container_end);
  }

  /// Looks at the first 4 bytes of every 8-byte aligned word for the container magic. Words
  /// split across chunks are assembled in word_.
  void ScanForFatbin(std::string_view chunk) {
    const char* p = chunk.data();
    const uint64_t base = base_, end = end_;
    uint64_t off = base;
    while (off < end) {
      uint64_t in_word = off & 7;
      if (in_word >= 4) {
        off += 8 - in_word;
        continue;
      }
      if (in_word == 0 && end - off >= 4) {
        // Fast path: whole words inside this chunk.
        for (; end - off >= 4; off += 8) {
          uint32_t word;
          std::memcpy(&word, p + (off - base), 4);
          if (word == fatbin::kMagic) FoundMagic(off);
          if (end - off < 8) {
            off = end;  // the rest of the word carries no magic byte we could still need
            break;
          }
        }
        continue;
      }
      word_[in_word] = p[off - base];
      if (in_word == 3) {
        uint32_t word;
        std::memcpy(&word, word_, 4);
        if (word == fatbin::kMagic) FoundMagic(off - 3);
      }
      ++off;
    }
  }

  void FoundMagic(uint64_t offset) {
    if (++fatbin_ranges_ > kMaxFatbinRanges) return;
    // A magic split across chunks: its first bytes came earlier and are the magic's own.
    std::string_view prefill;
    if (offset < base_) prefill = std::string_view(word_, base_ - offset);
    Want(offset, offset + fatbin::kHeaderSize, Role::kFatbinHeader, 0, prefill);
  }

  void Compact() {
    for (size_t i = 0; i < ranges_.size();) {
      Range& r = ranges_[i];
      bool finished = r.begin + r.bytes.size() >= r.end;
      if (finished && i != prefix_index_) {
        if (!r.bytes.empty()) done_.push_back(std::move(r));
        ranges_.erase(ranges_.begin() + static_cast<ptrdiff_t>(i));
        if (prefix_index_ != SIZE_MAX && prefix_index_ > i) --prefix_index_;
      } else {
        ++i;
      }
    }
  }

  bool stopped_ = false;
  uint64_t base_ = 0, end_ = 0;  // file range of the current chunk; end_: bytes fed so far
  uint64_t reserved_ = 0;        // bytes promised to ranges, bounded by kBudget
  std::string magic_;
  char word_[4] = {};
  format::Header header_;
  std::vector<format::Segment> segments_;
  std::vector<Range> ranges_;  // still being captured
  std::vector<Range> done_;
  size_t prefix_index_ = SIZE_MAX;
  uint64_t fatbin_ranges_ = 0;
};

}  // namespace

std::unique_ptr<util::Capturer> MakeCapturer() { return std::make_unique<ElfCapturer>(); }

}  // namespace imgcheck::elf

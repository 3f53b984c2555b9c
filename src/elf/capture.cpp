// The streaming ELF capturer. The file passes once, in order; what Parse needs is recognised on
// the way and kept:
//  - the first bytes of the file up to the dynamic section, at most CaptureLimits::prefix: with
//    GNU ld, gold and lld the ELF and program headers, notes, hash tables, .dynsym, .dynstr and
//    the version tables all sit at the start, before the dynamic section that points to them;
//  - where the prefix stops short of the dynamic section (a .dynstr of 50 MiB: TensorFlow's
//    libtensorflow_cc.so.2), the NUL-terminated strings that follow it are hashed as they pass
//    (NameHash, with their offsets: Symbol::hash), not kept, up to the first byte no symbol name
//    holds (a control character) or an empty string (two NULs); from the last kRing bytes before
//    that byte the bytes are kept again, up to kMovedTablesCap more (GNU ld puts the version tables
//    after .dynstr). Which of those strings are symbol names is known only at the dynamic section,
//    so Finish keeps the hashes Parse used. The strings that may be names the dynamic section
//    uses (MaybeDynamicName: a soname, a path or search path, a version name) are kept whole as
//    well, at their offsets, as if the prefix had reached them (DT_NEEDED, DT_SONAME, DT_RPATH,
//    DT_RUNPATH and the version tables' names can lie anywhere in the table: TensorFlow 2.21's
//    libtensorflow_framework.so.2 has them 20 KB before the end of its 15.5 MB .dynstr, with a
//    20 KB DT_RUNPATH between them and the end);
//  - PT_DYNAMIC, PT_NOTE and PT_INTERP as the stream passes them;
//  - once the dynamic section is known, every table it points to that still lies ahead (patchelf
//    and some NVIDIA libraries put .dynstr/.dynsym after it), up to the end of its PT_LOAD;
//  - a small PT_LOAD past the prefix that holds the dynamic section, up to it: patchelf moves
//    the tables it grows there, before the dynamic section;
//  - the section header table and the kShstrWindow bytes before it (.shstrtab sits there), so the
//    .nv_fatbin section can be found;
//  - the header of every fatbin container (found by its magic at 8-byte aligned offsets) and the
//    header of each of its entries, never their payloads.
// Finish() then runs Parse over what was kept, recording the ranges it reads, and keeps only those,
// with the sorted binding keys of the defined symbols in the result's annex (annex.h), so a
// cached reading binds without hashing or sorting again.
//
// Memory bound per capturer: while streaming at most kBudget (40 MiB) of kept bytes, string
// hashes (24 bytes each) and kept names (at most kMaxNames, kNameBytes in all), plus the
// bookkeeping of at most kMaxFatbinRanges small ranges (about 4 MiB); 44 MiB in the worst case,
// and real libraries stay far below (libcublasLt.so.13, 540 MB: 16 MiB peak, the prefix). After
// Finish only the bytes Parse reads remain (headers, dynamic tables, fatbin headers: 437 KB of
// libcublasLt.so.13, 0.08%).
#include <algorithm>
#include <cstring>
#include <string>

#include "elf/annex.h"
#include "elf/elf.h"
#include "elf/fatbin.h"
#include "elf/format.h"
#include "elf/parse.h"
#include "util/reader.h"

namespace imgcheck::elf {
namespace {

constexpr uint64_t kTableCap = 16u << 20;
constexpr uint64_t kSmallCap = 1u << 20;  // PT_DYNAMIC, PT_NOTE, PT_INTERP, section headers
constexpr uint64_t kShstrWindow = 64u << 10;
constexpr uint64_t kMovedTablesCap = 4u << 20;  // a PT_LOAD patchelf added for the dynamic tables
constexpr uint64_t kMovedTail = 64u << 10;      // the end of moved strings, kept whole
constexpr uint64_t kBudget = 40u << 20;
/// Fatbin container and entry headers followed at most (libcublasLt.so.13 has about 8,500).
constexpr uint64_t kMaxFatbinRanges = 1u << 15;
/// Below this many kept bytes Finish keeps everything: trimming would not pay for the re-parse.
constexpr uint64_t kTrimThreshold = 256u << 10;
/// The bytes before the end of the hashed strings kept again (the table that follows starts
/// there, and its first bytes may look like a string).
constexpr uint64_t kRing = 4u << 10;
/// The string that runs across the prefix's end is hashed whole when it is no longer than this.
constexpr uint64_t kMaxSeed = 64u << 10;
/// The hashed strings kept whole because they may be names the dynamic section uses: at most
/// kMaxNames of them and kNameBytes in all (TensorFlow 2.21's libtensorflow_framework.so.2 has
/// 52 such strings, 21 KB, past its prefix); a path at most kMaxPathName long (that library's
/// DT_RUNPATH: 20,297 bytes), any other at most kMaxShortName.
constexpr size_t kMaxNames = 4096;
constexpr uint64_t kNameBytes = 256u << 10;
constexpr uint64_t kMaxPathName = 64u << 10;
constexpr uint64_t kMaxShortName = 512;

bool InSymbolName(unsigned char c) { return c >= 0x20 && c != 0x7f; }

/// Whether a string of a string table may be one the dynamic section names: a path or search
/// path list (DT_RPATH, DT_RUNPATH: "/", "$ORIGIN"), a soname (DT_NEEDED, DT_SONAME, a
/// DT_VERNEED file: ".so"), or a version name ("GLIBC_2.2.5", "CXXABI_1.3": capitals, digits,
/// '_' and '.'). Symbol names rarely are; the cost is a byte or two, and a memchr on short
/// strings only (this runs for every string hashed, at decompression speed).
bool MaybeDynamicName(std::string_view s) {
  if (s.empty() || s.size() > kMaxPathName) return false;
  if (s[0] == '$' || s[0] == '/') return true;
  if (s.size() > kMaxShortName) return false;
  if (s[0] >= 'A' && s[0] <= 'Z') {
    bool version = std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    });
    if (version && s.find('_') != std::string_view::npos) return true;
  }
  return s.find(".so") != std::string_view::npos;
}

class ElfCapturer : public util::Capturer {
 public:
  explicit ElfCapturer(const CaptureLimits& limits) : prefix_cap_(limits.prefix) {}

  bool Feed(std::string_view chunk) override {
    if (stopped_) return false;
    base_ = end_;
    end_ += chunk.size();
    if (base_ < 4 && !CheckMagic(chunk)) return false;
    ScanForFatbin(chunk);
    const uint64_t hash_starts = hash_starts_;
    if (hash_to_ > hash_from_) HashStrings(chunk);
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
    // Strings whose hashing started while this chunk was handled (HashMovedStrings) may begin in
    // it.
    if (hash_starts_ != hash_starts && hash_to_ > hash_from_ && hash_from_ < end_)
      HashStrings(chunk);
    Compact();
    return true;
  }

  // A hole: zeros are fed only where a range still wants bytes; the rest is passed over (no
  // fatbin magic is made of zeros).
  bool Skip(uint64_t n) override {
    static const std::string kZeros(1 << 16, '\0');
    if (hash_to_ > hash_from_ && end_ >= hash_from_) StopHashing(end_);  // no string is a hole
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
    // In file order, so that each extent lands at the end or merges with the last one: the
    // kept names and fatbin headers can be thousands of small extents.
    std::vector<std::pair<uint64_t, std::string*>> parts;
    parts.reserve(ranges_.size() + done_.size() + names_.size());
    for (auto* list : {&ranges_, &done_})
      for (Range& r : *list) parts.emplace_back(r.begin, &r.bytes);
    for (util::SparseFile::Extent& n : names_) parts.emplace_back(n.offset, &n.bytes);
    std::stable_sort(parts.begin(), parts.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [offset, bytes] : parts) all.Take(offset, std::move(*bytes));
    ranges_.clear();
    done_.clear();
    names_.clear();
    hash_from_ = hash_to_ = 0;  // a string the stream ended in is no symbol name
    Annex annex;
    annex.strings = std::move(strings_);
    if (!annex.strings.empty()) all.set_annex(EncodeAnnex(annex));
    if (all.captured_bytes() <= kTrimThreshold) return all;
    RangeList touched;
    auto parsed = ParseRecording(all, &touched);
    if (!parsed || !*parsed) return all;
    util::SparseFile kept(size);
    std::vector<uint64_t> used;  // offsets of the hashed strings Parse read
    for (const auto& [offset, len] : touched) {
      if (auto bytes = all.View(offset, len)) {
        kept.Add(offset, *bytes);
      } else {
        used.push_back(offset);
      }
    }
    std::sort(used.begin(), used.end());
    std::erase_if(annex.strings, [&](const StringHash& s) {
      return !std::binary_search(used.begin(), used.end(), s.offset);
    });
    annex.has_keys = true;
    annex.keys = ExportKeys(**parsed);
    kept.set_annex(EncodeAnnex(annex));
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
    Want(0, prefix_cap_, Role::kPlain);
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
    if (prefix_end) {
      uint64_t goal = std::max(*prefix_end, header_.PhdrsEnd());
      TrimPrefix(goal);
      // The tables before the dynamic section run past the prefix: hash the strings there.
      if (goal > prefix_cap_) {
        hash_from_ = prefix_cap_;
        hash_to_ = goal;
      }
    }
    for (const auto& s : segments_) {
      uint64_t len = std::min(s.filesz, kSmallCap);
      // patchelf moves the tables it grows (.dynstr, .gnu.hash) with the dynamic section into a
      // PT_LOAD of their own at the end of the file, past the prefix (torch 2.4's vendored
      // libcusparseLt): that segment is kept up to the dynamic section when it is small.
      const format::Segment* load =
          s.type == format::kPtDynamic ? format::LoadSegmentAt(segments_, s.offset) : nullptr;
      if (load && load->offset >= prefix_cap_ && load->filesz <= kMovedTablesCap)
        Want(load->offset, s.offset, Role::kPlain);
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
    HashMovedStrings(sections);
  }

  /// patchelf moves a .dynstr it grows, with the dynamic section, into a PT_LOAD of its own at
  /// the end of the file, after the section headers (torch 2.10's libcusparseLt.so.0: 25 MiB of
  /// strings there). When that segment is too large to keep (kMovedTablesCap), its strings are
  /// hashed as they pass, as past the prefix: the first kRing and last kMovedTail bytes are kept
  /// (the names DT_NEEDED, DT_SONAME and DT_RUNPATH use: a linker writes them first, patchelf
  /// appends them), and from the end of the strings up to the dynamic section as StopHashing keeps.
  void HashMovedStrings(const std::vector<format::Section>& sections) {
    const format::Segment* dynamic = nullptr;
    for (const auto& s : segments_)
      if (s.type == format::kPtDynamic) dynamic = &s;
    const format::Segment* load =
        dynamic ? format::LoadSegmentAt(segments_, dynamic->offset) : nullptr;
    if (!load || load->offset < prefix_cap_ || load->filesz <= kMovedTablesCap) return;
    for (const auto& s : sections) {
      if (s.type != format::kShtDynsym || s.link >= sections.size()) continue;
      const format::Section& strings = sections[s.link];
      uint64_t end = util::CheckedAdd(strings.offset, strings.size).value_or(UINT64_MAX);
      if (strings.offset < base_ || strings.offset < load->offset || end > dynamic->offset) return;
      // The other tables patchelf moved there before the strings (.gnu.hash), kept whole.
      for (const auto& t : sections)
        if (IsDynamicTable(t.type) && t.offset >= base_ && t.offset >= load->offset &&
            t.offset < strings.offset)
          Want(t.offset, t.offset + std::min({t.size, kTableCap, strings.offset - t.offset}),
               Role::kPlain);
      moved_ = {strings.offset, end, dynamic->offset};
      Want(strings.offset, std::min(end, strings.offset + kRing), Role::kPlain);
      // The dynamic section's names need not be at either end: nvidia-cusparselt-cu12 0.6.3's
      // DT_NEEDED names lie 27 KB before the end of its 9 MB moved table.
      Want(end - std::min(end - strings.offset, kMovedTail), end, Role::kPlain);
      NameRefs(s, strings);
      StartMovedStrings(base_);
      return;
    }
  }

  /// SHT_HASH, SHT_DYNSYM, SHT_GNU_HASH, SHT_GNU_verdef, SHT_GNU_verneed, SHT_GNU_versym.
  static bool IsDynamicTable(uint32_t type) {
    return type == 5 || type == format::kShtDynsym || (type >= 0x6ffffff6 && type <= 0x6fffffff);
  }

  /// The name offsets of the symbol table `symbols` (when its bytes were kept: GNU ld puts
  /// .dynsym at the start, where it stays), as file offsets into `strings`: a linker merges a
  /// name into the tail of a longer one ("time" inside "localtime"), so a name can start inside
  /// a string, and HashStrings hashes those tails too.
  void NameRefs(const format::Section& symbols, const format::Section& strings) {
    moved_refs_.clear();
    const uint64_t entsize = header_.is64 ? 24 : 16;
    if (symbols.entsize != entsize) return;
    std::optional<std::string_view> bytes = Kept(symbols.offset, symbols.size);
    if (!bytes || symbols.size / entsize > format::kMaxEntries) return;
    uint64_t n = symbols.size / entsize;
    if (reserved_ + n * sizeof(uint64_t) > kBudget) return;
    reserved_ += n * sizeof(uint64_t);
    for (uint64_t i = 0; i < n; ++i) {
      util::Reader r(bytes->substr(i * entsize, 4), header_.big_endian);
      uint32_t name = r.Read<uint32_t>().value_or(0);
      if (name != 0 && name < strings.size) moved_refs_.push_back(strings.offset + name);
    }
    std::sort(moved_refs_.begin(), moved_refs_.end());
    moved_refs_.erase(std::unique(moved_refs_.begin(), moved_refs_.end()), moved_refs_.end());
  }

  /// The kept bytes of [begin, begin + len) when one range holds them all.
  std::optional<std::string_view> Kept(uint64_t begin, uint64_t len) const {
    for (const auto* list : {&ranges_, &done_})
      for (const Range& r : *list)
        if (r.begin <= begin && begin - r.begin <= r.bytes.size() &&
            len <= r.bytes.size() - (begin - r.begin))
          return std::string_view(r.bytes).substr(begin - r.begin, len);
    return std::nullopt;
  }

  /// Hashes the moved strings once no other strings are being hashed, if they start at or after
  /// `pos`, which the stream has not hashed past.
  void StartMovedStrings(uint64_t pos) {
    if (moved_.to == 0 || hash_to_ > hash_from_) return;
    if (moved_.from >= pos) {
      hash_from_ = moved_.from;
      hash_to_ = moved_.to;
      keep_to_ = moved_.keep_to;
      name_refs_ = std::move(moved_refs_);
      next_ref_ = 0;
      ++hash_starts_;
    }
    moved_ = {};
    moved_refs_.clear();
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

  /// Hashes the strings of [hash_from_, hash_to_) in `chunk`; before hash_from_, keeps the
  /// bytes since the last NUL (the string that runs across it, hashed whole).
  void HashStrings(std::string_view chunk) {
    uint64_t pos = base_;
    if (pos < hash_from_) {
      uint64_t upto = std::min(end_, hash_from_);
      std::string_view before = chunk.substr(0, upto - base_);
      size_t nul = before.rfind('\0');
      if (nul != std::string_view::npos) {
        seed_.assign(before.substr(nul + 1));
      } else if (seed_.size() <= kMaxSeed) {
        seed_.append(before.substr(0, std::min<uint64_t>(before.size(), kMaxSeed + 1)));
      }
      if (upto == hash_from_) {
        bool usable =
            seed_.size() <= kMaxSeed && std::all_of(seed_.begin(), seed_.end(), [](char c) {
              return InSymbolName(static_cast<unsigned char>(c));
            });
        string_start_ = hash_from_ - std::min<uint64_t>(seed_.size(), hash_from_);
        string_hash_ = NameHash(seed_);
        string_ok_ = usable;
        ring_ = seed_.size() <= kRing ? seed_ : seed_.substr(seed_.size() - kRing);
        pending_.clear();
        if (usable) pending_ = seed_;  // [string_start_, hash_from_)
        seed_.clear();
        seed_.shrink_to_fit();
      }
      pos = upto;
    }
    const uint64_t stop = std::min(end_, hash_to_);
    if (pos >= stop) return;
    const unsigned char* p = reinterpret_cast<const unsigned char*>(chunk.data());
    constexpr uint64_t kPrime = 0x100000001b3ULL;
    uint64_t at = pos, h = string_hash_;
    for (; at < stop; ++at) {
      unsigned char c = p[at - base_];
      if (next_ref_ < name_refs_.size() && at >= name_refs_[next_ref_]) {
        // A name that starts inside this string: its tail is hashed alongside.
        if (at == name_refs_[next_ref_] && at != string_start_)
          tails_.push_back({at, 0, NameHash({})});
        ++next_ref_;
      }
      if (c == 0) {
        if (at == string_start_ && at > hash_from_) break;  // "\0\0": no string table mid-way
        if (string_ok_ && at > string_start_) {
          if (reserved_ + sizeof(StringHash) > kBudget || at - string_start_ > UINT32_MAX) break;
          reserved_ += sizeof(StringHash);
          strings_.push_back({string_start_, static_cast<uint32_t>(at - string_start_), h});
          KeepIfName(chunk, pos, at);
        }
        pending_.clear();
        for (StringHash& tail : tails_) {
          if (at == tail.offset || reserved_ + sizeof(StringHash) > kBudget) continue;
          reserved_ += sizeof(StringHash);
          strings_.push_back({tail.offset, static_cast<uint32_t>(at - tail.offset), tail.hash});
        }
        tails_.clear();
        string_start_ = at + 1;
        string_ok_ = true;
        h = NameHash({});
      } else if (!InSymbolName(c)) {
        break;
      } else {
        h = (h ^ c) * kPrime;
        for (StringHash& tail : tails_) tail.hash = (tail.hash ^ c) * kPrime;
      }
    }
    string_hash_ = h;
    hashed_bytes_ += at - pos;
    if (at == stop && at < hash_to_) HoldPending(chunk, pos, at);
    std::string_view passed = chunk.substr(pos - base_, at - pos);
    if (passed.size() >= kRing) {
      ring_.assign(passed.substr(passed.size() - kRing));
    } else {
      ring_.append(passed);
      if (ring_.size() > kRing) ring_.erase(0, ring_.size() - kRing);
    }
    if (at < stop || at == hash_to_) StopHashing(at);
  }

  /// The hashed string [string_start_, at) ended at `at`; this chunk holds it from `pos` on
  /// (pending_ what came before). Keeps it when it may be a name the dynamic section uses.
  void KeepIfName(std::string_view chunk, uint64_t pos, uint64_t at) {
    const uint64_t len = at - string_start_;
    if (len > kMaxPathName) return;
    std::string_view s;
    if (string_start_ >= pos) {
      s = chunk.substr(string_start_ - base_, len);
    } else if (pending_.size() == pos - string_start_) {
      pending_.append(chunk.substr(pos - base_, at - pos));
      s = pending_;
    } else {
      return;
    }
    if (!MaybeDynamicName(s) || names_.size() >= kMaxNames || name_bytes_ + len + 1 > kNameBytes ||
        reserved_ + len + 1 > kBudget)
      return;
    name_bytes_ += len + 1;
    reserved_ += len + 1;
    std::string bytes;
    bytes.reserve(len + 1);
    bytes.append(s);
    bytes.push_back('\0');  // as the table has it: the parser reads up to the NUL
    names_.push_back({string_start_, std::move(bytes)});
  }

  /// The chunk ends inside the string [string_start_, ...): holds its bytes so far in pending_
  /// while it may still become a kept name (KeepIfName), so a name split across chunks is kept.
  void HoldPending(std::string_view chunk, uint64_t pos, uint64_t at) {
    if (!string_ok_ || at <= string_start_) return;
    const bool fresh = string_start_ >= pos;  // it began in this chunk
    if (!fresh && pending_.size() != pos - string_start_) return;
    const char first = fresh ? chunk[string_start_ - base_] : pending_[0];
    if (at - string_start_ > (first == '$' || first == '/' ? kMaxPathName : kMaxShortName)) {
      pending_.clear();
    } else if (fresh) {
      pending_.assign(chunk.substr(string_start_ - base_, at - string_start_));
    } else {
      pending_.append(chunk.substr(pos - base_, at - pos));
    }
  }

  /// Ends the hashed strings at `at` and keeps the bytes from kRing before it on.
  void StopHashing(uint64_t at) {
    uint64_t goal = std::max(hash_to_, keep_to_);
    // A long run of name bytes is a string table even when no string of it could be hashed:
    // patchelf fills the .dynstr it moved with 'X' (libcusparseLt.so.0: 26 MiB, the version
    // tables right after it).
    bool table = hashed_bytes_ >= kRing;
    hashed_bytes_ = 0;
    hash_from_ = hash_to_ = keep_to_ = 0;
    name_refs_.clear();
    tails_.clear();
    pending_.clear();
    KeepAfterStrings(at, goal, table);
    StartMovedStrings(at);
  }

  void KeepAfterStrings(uint64_t at, uint64_t goal, bool table) {
    // No string passed (the prefix ended in code or data, not in .dynstr): nothing follows it
    // that the dynamic section will ask for, and the budget stays for the tables it points to.
    if (strings_.empty() && !table) return;
    // At the table's end the last strings are kept too: the dynamic section's own names may be
    // there (patchelf appends them).
    uint64_t begin = at - std::min<uint64_t>(ring_.size(), at);
    Want(begin, at >= goal ? at : std::min(goal, at + kMovedTablesCap), Role::kPlain, 0,
         std::string_view(ring_).substr(ring_.size() - (at - begin)));
    ring_.clear();
    ring_.shrink_to_fit();
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
  const uint64_t prefix_cap_;
  // The strings hashed past the prefix: [hash_from_, hash_to_) while it lasts (empty: none);
  // when they end, the bytes up to keep_to_ (or hash_to_) are kept, at most kMovedTablesCap.
  uint64_t hash_from_ = 0, hash_to_ = 0, keep_to_ = 0;
  // A .dynstr in a large moved PT_LOAD, hashed when the prefix's strings are done (to: 0: none).
  struct MovedStrings {
    uint64_t from = 0, to = 0, keep_to = 0;
  } moved_;
  uint64_t hash_starts_ = 0;   // hashings StartMovedStrings began
  uint64_t hashed_bytes_ = 0;  // bytes the current hashing passed
  // Name offsets into the strings being hashed, sorted (NameRefs), and the next one not passed;
  // the tails of the current string that are names, hashed as it passes.
  std::vector<uint64_t> name_refs_, moved_refs_;
  size_t next_ref_ = 0;
  std::vector<StringHash> tails_;
  std::string seed_;  // before hash_from_: the bytes since the last NUL
  std::string ring_;  // the last kRing bytes hashed
  // The current string's bytes before those HashStrings is passing, while it may be a name
  // KeepIfName keeps; a size other than theirs means they were not held.
  std::string pending_;
  uint64_t string_start_ = 0, string_hash_ = 0;
  bool string_ok_ = false;  // the current string is hashed from its first byte
  std::vector<StringHash> strings_;
  std::vector<util::SparseFile::Extent> names_;  // hashed strings kept whole, with their NUL
  uint64_t name_bytes_ = 0;                      // of names_, at most kNameBytes
};

}  // namespace

std::unique_ptr<util::Capturer> MakeCapturer(const CaptureLimits& limits) {
  return std::make_unique<ElfCapturer>(limits);
}

}  // namespace imgcheck::elf

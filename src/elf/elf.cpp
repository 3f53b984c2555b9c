#include "elf/elf.h"

#include <algorithm>
#include <map>

#include "elf/annex.h"
#include "elf/fatbin.h"
#include "elf/format.h"
#include "elf/parse.h"
#include "util/path.h"
#include "util/reader.h"

namespace imgcheck::elf {
namespace {

using format::DynEntry;
using format::Header;
using format::Section;
using format::Segment;

constexpr uint32_t kShtDynamic = 6;
constexpr uint16_t kShnUndef = 0;
constexpr uint8_t kStbGlobal = 1, kStbWeak = 2, kStbGnuUnique = 10;
constexpr uint16_t kVersymHidden = 0x8000, kVersymIndexMask = 0x7fff;
constexpr uint16_t kVerFlgBase = 1;
// Bound on the version walks' work (ParseOptions::table_bytes bounds what they keep).
constexpr uint64_t kMaxVersionEntries = 1u << 16;

/// Reads one ELF file's captured parts into an ElfInfo. Each step records what it could not
/// read in info.problems and leaves the other steps' results intact.
class Parser {
 public:
  Parser(const util::SparseFile& file, const Header& header, ElfInfo& info, RangeList* touched,
         const ParseOptions& options)
      : file_(file), h_(header), info_(info), left_(options.table_bytes), touched_(touched) {}

  void Run() {
    ReadProgramHeaders();
    ReadSectionHeaders();
    ReadInterpreter();
    ReadNotes();
    // The first problem met from here to the symbols says why they were not all read.
    size_t before = info_.problems.size();
    ReadDynamicSection();
    ReadVersions();
    ReadAnnex();
    ReadSymbols();
    if (info_.problems.size() > before) info_.symbols_unread = info_.problems[before];
    ReadFatbin();
  }

 private:
  /// [offset, offset+len) of the file, or nullopt with a problem naming `what`.
  std::optional<std::string_view> View(uint64_t offset, uint64_t len, const std::string& what) {
    auto v = file_.View(offset, len);
    if (v) Touch(offset, len);
    if (!v) {
      auto end = util::CheckedAdd(offset, len);
      bool outside = !end || *end > file_.size();
      Problem(what + (outside ? " lies outside the file" : " not captured") + " (offset " +
              format::Hex(offset) + ", " + std::to_string(len) + " bytes)");
    }
    return v;
  }
  /// From `offset` to the end of the captured extent holding it; the caller Touch()es what it
  /// really used.
  std::optional<std::string_view> ViewFrom(uint64_t offset, const std::string& what) {
    auto v = file_.ViewFrom(offset);
    if (!v) Problem(what + " not captured (offset " + format::Hex(offset) + ")");
    return v;
  }
  void Problem(std::string message) {
    if (info_.problems.size() < format::kMaxProblems)
      info_.problems.push_back(std::move(message));
    else if (info_.problems.size() == format::kMaxProblems)
      info_.problems.push_back("further problems omitted");
  }
  void Touch(uint64_t offset, uint64_t len) {
    if (touched_ && len != 0) touched_->emplace_back(offset, len);
  }

  void ReadProgramHeaders() {
    if (h_.phnum == 0) return;
    auto bytes = View(h_.phoff, h_.PhdrsEnd() - h_.phoff, "program headers");
    if (bytes) segments_ = format::ReadSegments(h_, *bytes);
  }

  void ReadSectionHeaders() {
    if (h_.shnum == 0 || h_.shoff == 0) return;
    // Section headers are optional for loading; their absence is no problem to report.
    auto bytes = file_.View(h_.shoff, h_.ShdrsEnd() - h_.shoff);
    if (!bytes) return;
    Touch(h_.shoff, bytes->size());
    sections_ = format::ReadSections(h_, *bytes);
    if (h_.shstrndx < sections_.size()) {
      const Section& s = sections_[h_.shstrndx];
      if (auto names = file_.View(s.offset, s.size)) {
        section_names_ = *names;
        Touch(s.offset, s.size);
      }
    }
  }

  const Section* FindSection(std::string_view name) const {
    for (const auto& s : sections_)
      if (util::CString(section_names_, s.name) == name) return &s;
    return nullptr;
  }

  void ReadInterpreter() {
    for (const auto& s : segments_) {
      if (s.type != format::kPtInterp) continue;
      auto bytes = View(s.offset, s.filesz, "PT_INTERP");
      if (!bytes) continue;
      auto path = util::CString(*bytes, 0);
      info_.interpreter = path ? std::string(*path) : std::string(*bytes);
    }
  }

  void ReadDynamicSection() {
    std::optional<std::string_view> bytes;
    for (const auto& s : segments_)
      if (s.type == format::kPtDynamic) bytes = View(s.offset, s.filesz, "PT_DYNAMIC");
    if (!bytes && segments_.empty()) {
      for (const auto& s : sections_)
        if (s.type == kShtDynamic) bytes = View(s.offset, s.size, "dynamic section");
    }
    if (!bytes) return;
    dynamic_ = format::ReadDynamic(h_, *bytes);
    tables_ = format::LocateTables(segments_, dynamic_);

    bool wants_strings = false;
    for (const auto& d : dynamic_) {
      switch (d.tag) {
        case format::kDtNeeded:
        case format::kDtSoname:
        case format::kDtRpath:
        case format::kDtRunpath:
          wants_strings = true;
          break;
        case format::kDtFlags:
          info_.flags = d.value;
          break;
        case format::kDtFlags1:
          info_.flags_1 = d.value;
          break;
        default:
          break;
      }
    }
    if (!tables_.strtab) {
      if (wants_strings) Problem("DT_STRTAB missing or not mapped by a PT_LOAD segment");
      return;
    }
    // A DT_STRSZ past the captured bytes still leaves the strings that were captured usable.
    if (auto whole = file_.View(*tables_.strtab, tables_.strsz)) {
      strtab_ = *whole;
    } else if (auto part = ViewFrom(*tables_.strtab, "dynamic string table")) {
      strtab_ = part->substr(0, tables_.strsz);
    }
    Touch(*tables_.strtab, strtab_.size());
    // A name that cannot be read is left out (never an empty name the loader would search
    // for), and said in names_unread.
    for (const auto& d : dynamic_) {
      const char* tag = NameTag(d.tag);
      if (tag == nullptr) continue;
      if (d.tag == format::kDtRunpath) info_.has_runpath = true;  // present, even unread
      std::optional<std::string> name = String(d.value, tag);
      if (!name) {
        if (!info_.table_limit_reached && info_.names_unread.size() < format::kMaxProblems)
          info_.names_unread.push_back(tag + StringProblem(d.value));
        continue;
      }
      if (d.tag == format::kDtNeeded) info_.needed.push_back(std::move(*name));
      if (d.tag == format::kDtSoname) info_.soname = std::move(*name);
      if (d.tag == format::kDtRpath) info_.rpath = util::Split(*name, ':');
      if (d.tag == format::kDtRunpath) info_.runpath = util::Split(*name, ':');
    }
  }

  /// The name of a dynamic entry whose value is a string of the table; null for the others.
  static const char* NameTag(int64_t tag) {
    switch (tag) {
      case format::kDtNeeded:
        return "DT_NEEDED";
      case format::kDtSoname:
        return "DT_SONAME";
      case format::kDtRpath:
        return "DT_RPATH";
      case format::kDtRunpath:
        return "DT_RUNPATH";
      default:
        return nullptr;
    }
  }

  /// The dynamic string at `offset` (`what` names its user: "DT_NEEDED"), or nullopt with a
  /// problem saying why it cannot be read.
  std::optional<std::string> String(uint64_t offset, const char* what) {
    auto s = KeptString(offset);
    if (!s) {
      Problem(std::string(what) + StringProblem(offset));
      return std::nullopt;
    }
    if (!Spend(s->size())) return std::nullopt;
    return std::string(*s);
  }

  /// Why the string at `offset` of the string table cannot be read, after the name of its user.
  std::string StringProblem(uint64_t offset) const {
    if (offset >= tables_.strsz)
      return " string at " + format::Hex(offset) + " outside the string table";
    auto at = util::CheckedAdd(*tables_.strtab, offset);
    auto rest = at ? file_.ViewFrom(*at) : std::nullopt;
    // The capture kept the table's bytes from `offset` to its end, and no NUL among them.
    if (rest && rest->size() >= tables_.strsz - offset)
      return " string at " + format::Hex(offset) + " not terminated in the string table";
    return " at .dynstr offset " + format::Hex(offset) + " not captured";
  }

  /// The string at `offset` of the string table: in its first captured extent, or in a later
  /// one (the capture keeps the end of a table whose middle it hashed), NUL inside the table.
  std::optional<std::string_view> KeptString(uint64_t offset) {
    if (auto s = util::CString(strtab_, offset)) return s;
    if (!tables_.strtab || offset >= tables_.strsz) return std::nullopt;
    auto at = util::CheckedAdd(*tables_.strtab, offset);
    auto rest = at ? file_.ViewFrom(*at) : std::nullopt;
    if (!rest) return std::nullopt;
    auto s = util::CString(rest->substr(0, tables_.strsz - offset), 0);
    if (s) Touch(*at, s->size() + 1);
    return s;
  }

  /// Takes `bytes` of ParseOptions::table_bytes; false once they are spent (real libraries use
  /// a few MiB: libtorch_cpu has ~10^5 symbols).
  bool Spend(uint64_t bytes) {
    if (bytes <= left_) {
      left_ -= bytes;
      return true;
    }
    if (!info_.table_limit_reached) Problem("dynamic tables expand past the limit; rest not read");
    info_.table_limit_reached = true;
    left_ = 0;
    return false;
  }

  void ReadNotes() {
    for (const auto& s : segments_) {
      if (s.type != format::kPtNote) continue;
      auto bytes = View(s.offset, s.filesz, "PT_NOTE");
      if (bytes) ReadNoteSegment(*bytes, s.align == 8 ? 8 : 4);
    }
  }

  void ReadNoteSegment(std::string_view bytes, uint64_t align) {
    util::Reader r(bytes, h_.big_endian);
    auto padded = [align](uint64_t n) { return n + ((align - n % align) % align); };
    while (r.remaining() >= 12) {
      uint32_t namesz = *r.Read<uint32_t>(), descsz = *r.Read<uint32_t>(),
               type = *r.Read<uint32_t>();
      auto name = r.Bytes(namesz);
      if (!name || !r.Skip(padded(namesz) - namesz)) return;
      auto desc = r.Bytes(descsz);
      if (!desc) return;
      r.Skip(padded(descsz) - descsz);
      if (type == format::kNtGnuBuildId && *name == std::string_view("GNU\0", 4))
        info_.build_id = format::HexBytes(*desc);
    }
  }

  /// Version index -> name, from DT_VERDEF and DT_VERNEED (indices share one space).
  void ReadVersions() {
    if (tables_.verdef) ReadVerdef(*tables_.verdef);
    if (tables_.verneed) ReadVerneed(*tables_.verneed);
  }

  void ReadVerdef(uint64_t offset) {
    auto bytes = ViewFrom(offset, "DT_VERDEF");
    if (!bytes) return;
    // Elf_Verdef: u16 version, flags, ndx, cnt; u32 hash, aux, next. Elf_Verdaux: u32 name, next.
    uint64_t pos = 0, used = 0;
    for (uint64_t i = 0; i < tables_.verdefnum && i < kMaxVersionEntries; ++i) {
      util::Reader r(*bytes, h_.big_endian);
      if (!r.Seek(pos) || r.remaining() < 20) {
        Problem("DT_VERDEF entry " + std::to_string(i) + " not captured");
        return;
      }
      r.Skip(2);
      uint16_t flags = *r.Read<uint16_t>(), ndx = *r.Read<uint16_t>(), cnt = *r.Read<uint16_t>();
      r.Skip(4);
      uint32_t aux = *r.Read<uint32_t>(), next = *r.Read<uint32_t>();
      used = std::max(used, r.offset());
      if (cnt > 0) {
        util::Reader a(*bytes, h_.big_endian);
        auto name = a.Seek(pos + aux) ? a.Read<uint32_t>() : std::nullopt;
        used = std::max(used, a.offset());
        if (!name) {
          Problem("DT_VERDEF auxiliary entry not captured");
        } else {
          std::string n = String(*name, "verdef").value_or("");
          version_names_[ndx & kVersymIndexMask] = n;
          if (!(flags & kVerFlgBase) || info_.version_definitions.empty())
            info_.version_definitions.push_back(n);
          else
            info_.version_definitions.insert(info_.version_definitions.begin(), n);
        }
      }
      if (next == 0) break;
      pos += next;
    }
    Touch(offset, used);
  }

  void ReadVerneed(uint64_t offset) {
    auto bytes = ViewFrom(offset, "DT_VERNEED");
    if (!bytes) return;
    // Elf_Verneed: u16 version, cnt; u32 file, aux, next.
    // Elf_Vernaux: u32 hash; u16 flags, other; u32 name, next.
    uint64_t pos = 0, used = 0, aux_seen = 0;
    for (uint64_t i = 0; i < tables_.verneednum && i < kMaxVersionEntries; ++i) {
      util::Reader r(*bytes, h_.big_endian);
      if (!r.Seek(pos) || r.remaining() < 16) {
        Problem("DT_VERNEED entry " + std::to_string(i) + " not captured");
        return;
      }
      r.Skip(2);
      uint16_t cnt = *r.Read<uint16_t>();
      uint32_t file = *r.Read<uint32_t>(), aux = *r.Read<uint32_t>(), next = *r.Read<uint32_t>();
      used = std::max(used, r.offset());
      VersionNeed need{String(file, "verneed file").value_or(""), {}};
      uint64_t apos = pos + aux;
      for (uint16_t j = 0; j < cnt && ++aux_seen <= kMaxVersionEntries; ++j) {
        util::Reader a(*bytes, h_.big_endian);
        if (!a.Seek(apos) || a.remaining() < 16) {
          Problem("DT_VERNEED auxiliary entry not captured");
          break;
        }
        a.Skip(6);
        uint16_t other = *a.Read<uint16_t>();
        uint32_t name = *a.Read<uint32_t>(), anext = *a.Read<uint32_t>();
        used = std::max(used, a.offset());
        std::string n = String(name, "vernaux").value_or("");
        version_names_[other & kVersymIndexMask] = n;
        need.versions.push_back(n);
        if (anext == 0) break;
        apos += anext;
      }
      info_.version_needs.push_back(std::move(need));
      if (next == 0) break;
      pos += next;
    }
    Touch(offset, used);
  }

  std::optional<uint64_t> SymbolCount() {
    if (tables_.hash) {
      if (auto bytes = View(*tables_.hash, 8, "DT_HASH"))
        return format::SymbolCountFromHash(h_, *bytes);
    }
    if (tables_.gnu_hash) {
      if (auto bytes = ViewFrom(*tables_.gnu_hash, "DT_GNU_HASH")) {
        uint64_t used = 0;
        auto n = format::SymbolCountFromGnuHash(h_, *bytes, &used);
        Touch(*tables_.gnu_hash, used);
        if (n) return n;
        Problem("DT_GNU_HASH chains not captured or inconsistent");
      }
    }
    for (const auto& s : sections_)
      if (s.type == format::kShtDynsym && s.offset == tables_.symtab && s.entsize != 0)
        return s.size / h_.SymSize();
    return std::nullopt;
  }

  void ReadAnnex() {
    if (file_.annex().empty()) return;
    std::optional<Annex> a = DecodeAnnex(file_.annex());
    if (!a) {
      Problem("the capture's annex of symbol hashes is corrupt");
      return;
    }
    annex_ = std::move(*a);
  }

  /// The hash of the symbol name at `offset` of the string table, where only that was captured
  /// (the name lies past the kept bytes); nullopt when neither was.
  std::optional<uint64_t> HashedName(uint64_t offset) {
    if (!tables_.strtab) return std::nullopt;
    auto at = util::CheckedAdd(*tables_.strtab, offset);
    const StringHash* s = at ? annex_.Find(*at) : nullptr;
    // The NUL must lie inside the table, as CString requires of a kept name.
    if (!s || offset + s->length >= tables_.strsz) return std::nullopt;
    Touch(*at, uint64_t{s->length} + 1);  // Finish keeps the hashes Parse used
    return s->hash;
  }

  void ReadSymbols() {
    if (!tables_.symtab) return;
    auto count = SymbolCount();
    if (!count) {
      Problem("dynamic symbol count unknown (no usable DT_HASH, DT_GNU_HASH or .dynsym)");
      return;
    }
    // A count past the captured table fails the view: only symbols present are read.
    uint64_t n = *count;
    auto syms = View(*tables_.symtab, n * h_.SymSize(), "dynamic symbol table");
    if (!syms) return;
    std::optional<std::string_view> versym;
    if (tables_.versym) versym = View(*tables_.versym, n * 2, "DT_VERSYM");
    // Defined symbols known by their hash alone: their keys, with those of `exported`.
    std::vector<uint64_t> hashed_keys;
    bool hashed_exports = false;
    for (uint64_t i = 1; i < n; ++i) {
      util::Reader r(syms->substr(i * h_.SymSize(), h_.SymSize()), h_.big_endian);
      uint32_t name = *r.Read<uint32_t>();
      if (!h_.is64) r.Skip(8);  // Elf32_Sym: st_value, st_size come before st_info
      uint8_t info = *r.Read<uint8_t>();
      r.Skip(1);
      uint16_t shndx = *r.Read<uint16_t>();
      uint8_t bind = info >> 4;
      if (bind != kStbGlobal && bind != kStbWeak && bind != kStbGnuUnique) continue;
      if (!Spend(sizeof(Symbol))) return;
      Symbol sym;
      if (auto kept = KeptString(name)) {
        if (kept->empty()) continue;
        if (!Spend(kept->size())) return;
        sym.name = std::string(*kept);
      } else if (auto hash = HashedName(name)) {
        sym.hash = *hash;
      } else if (shndx != kShnUndef && annex_.has_keys) {
        continue;  // a definition: the capture's keys hold it
      } else {
        Problem("symbol name string at " + format::Hex(name) + " outside the string table");
        continue;
      }
      sym.weak = bind == kStbWeak;
      sym.untyped = shndx == kShnUndef && (info & 0xf) == 0;  // STT_NOTYPE
      if (versym) {
        util::Reader v(versym->substr(i * 2, 2), h_.big_endian);
        uint16_t index = *v.Read<uint16_t>();
        sym.hidden_version = (index & kVersymHidden) != 0;
        auto it = version_names_.find(index & kVersymIndexMask);
        if (it != version_names_.end() && (index & kVersymIndexMask) > 1) sym.version = it->second;
      }
      if (shndx == kShnUndef) {
        info_.imported.push_back(std::move(sym));
      } else if (!sym.name.empty()) {
        info_.exported.push_back(std::move(sym));
      } else if (!annex_.has_keys) {
        hashed_exports = true;
        AddExportKeys(sym.hash, sym.version, sym.hidden_version, hashed_keys);
      }
    }
    if (annex_.has_keys) {
      info_.has_export_keys = true;
      info_.export_keys = std::move(annex_.keys);
    } else if (hashed_exports) {
      for (const Symbol& e : info_.exported)
        AddExportKeys(NameHash(e.name), e.version, e.hidden_version, hashed_keys);
      std::sort(hashed_keys.begin(), hashed_keys.end());
      hashed_keys.erase(std::unique(hashed_keys.begin(), hashed_keys.end()), hashed_keys.end());
      info_.has_export_keys = true;
      info_.export_keys = std::move(hashed_keys);
    }
  }

  void ReadFatbin() {
    if (const Section* s = FindSection(".nv_fatbin")) {
      auto end = util::CheckedAdd(s->offset, s->size);
      if (!end || *end > file_.size()) {
        Problem(".nv_fatbin section lies outside the file");
        return;
      }
      fatbin::Walk(file_, s->offset, *end, info_.fatbin, info_.problems, touched_);
      return;
    }
    if (!section_names_.empty()) return;  // section names known, and no .nv_fatbin among them
    fatbin::Scan(file_, info_.fatbin, info_.problems, touched_);
  }

  const util::SparseFile& file_;
  const Header h_;
  ElfInfo& info_;
  std::vector<Segment> segments_;
  std::vector<Section> sections_;
  std::string_view section_names_;
  std::vector<DynEntry> dynamic_;
  format::DynamicTables tables_;
  std::string_view strtab_;
  std::map<uint16_t, std::string> version_names_;
  Annex annex_;
  uint64_t left_;  // of ParseOptions::table_bytes
  RangeList* touched_;
};

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL, kFnvPrime = 0x100000001b3ULL;

uint64_t Mix(uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) h = (h ^ static_cast<uint64_t>(c)) * kFnvPrime;
  return h;
}

}  // namespace

uint64_t NameHash(std::string_view name) { return Mix(kFnvOffset, name); }

uint64_t VersionedKey(uint64_t name_hash, std::string_view version) {
  return Mix((name_hash ^ 0xffu) * kFnvPrime, version);  // 0xff: in no name or version
}

void AddExportKeys(uint64_t name_hash, const std::string& version, bool hidden,
                   std::vector<uint64_t>& keys) {
  if (!hidden || version.empty()) keys.push_back(name_hash);
  keys.push_back(VersionedKey(name_hash, version));
}

std::vector<uint64_t> ExportKeys(const ElfInfo& info) {
  if (info.has_export_keys) return info.export_keys;
  std::vector<uint64_t> keys;
  keys.reserve(info.exported.size() * 2);
  for (const Symbol& s : info.exported)
    AddExportKeys(NameHash(s.name), s.version, s.hidden_version, keys);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

util::Expected<std::optional<ElfInfo>> Parse(const util::SparseFile& file,
                                             const ParseOptions& options) {
  return ParseRecording(file, nullptr, options);
}

util::Expected<std::optional<ElfInfo>> ParseRecording(const util::SparseFile& file,
                                                      RangeList* touched,
                                                      const ParseOptions& options) {
  auto magic = file.View(0, 4);
  if (!magic || !format::IsElf(*magic)) return std::optional<ElfInfo>();
  auto head = file.ViewFrom(0);
  auto header = format::ReadHeader(head->substr(0, std::min<size_t>(head->size(), 64)));
  if (touched) touched->emplace_back(0, std::min<size_t>(head->size(), 64));
  if (!header) return header.error();
  const Header& h = *header;
  if (h.phnum != 0 && h.PhdrsEnd() > file.size())
    return util::MakeError("corrupt ELF header: program headers end past the file at offset " +
                           format::Hex(h.PhdrsEnd()));
  ElfInfo info;
  info.is64 = h.is64;
  info.big_endian = h.big_endian;
  info.machine = h.machine;
  info.type = h.type;
  Parser(file, h, info, touched, options).Run();
  return std::optional<ElfInfo>(std::move(info));
}

}  // namespace imgcheck::elf

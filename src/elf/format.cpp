#include "elf/format.h"

#include <algorithm>
#include <cstring>

#include "util/reader.h"

namespace imgcheck::elf::format {
namespace {

using util::Reader;

constexpr uint8_t kClass32 = 1, kClass64 = 2, kData2Lsb = 1, kData2Msb = 2;

/// Reads an address-sized word (Elf32_Addr/Off or Elf64_Addr/Off) as 64 bits.
std::optional<uint64_t> ReadWord(Reader& r, bool is64) {
  if (is64) return r.Read<uint64_t>();
  auto v = r.Read<uint32_t>();
  if (!v) return std::nullopt;
  return uint64_t{*v};
}

util::Error HeaderError(const std::string& what, uint64_t offset) {
  return util::MakeError("corrupt ELF header: " + what + " at offset " + std::to_string(offset));
}

constexpr char kHexDigits[] = "0123456789abcdef";

}  // namespace

std::string Hex(uint64_t v) {
  std::string s;
  do {
    s.insert(s.begin(), kHexDigits[v & 15]);
    v >>= 4;
  } while (v != 0);
  return "0x" + s;
}

std::string HexBytes(std::string_view bytes) {
  std::string s;
  for (unsigned char c : bytes) {
    s += kHexDigits[c >> 4];
    s += kHexDigits[c & 15];
  }
  return s;
}

bool IsElf(std::string_view bytes) {
  return bytes.size() >= 4 && bytes.substr(0, 4) ==
                                  "\x7f"
                                  "ELF";
}

util::Expected<Header> ReadHeader(std::string_view bytes) {
  if (bytes.size() < 16) return HeaderError("truncated identification", bytes.size());
  Header h;
  auto cls = static_cast<uint8_t>(bytes[4]);
  auto data = static_cast<uint8_t>(bytes[5]);
  if (cls != kClass32 && cls != kClass64) return HeaderError("bad class " + std::to_string(cls), 4);
  if (data != kData2Lsb && data != kData2Msb)
    return HeaderError("bad data encoding " + std::to_string(data), 5);
  h.is64 = cls == kClass64;
  h.big_endian = data == kData2Msb;
  const uint64_t min_size = h.is64 ? 64 : 52;
  if (bytes.size() < min_size) return HeaderError("truncated header", bytes.size());

  Reader r(bytes, h.big_endian);
  r.Seek(16);
  // Fields in gABI order; the reads cannot fail after the size check above.
  h.type = r.Read<uint16_t>().value_or(0);
  h.machine = r.Read<uint16_t>().value_or(0);
  r.Skip(4);            // e_version
  ReadWord(r, h.is64);  // e_entry
  h.phoff = ReadWord(r, h.is64).value_or(0);
  h.shoff = ReadWord(r, h.is64).value_or(0);
  r.Skip(4);  // e_flags
  h.ehsize = r.Read<uint16_t>().value_or(0);
  h.phentsize = r.Read<uint16_t>().value_or(0);
  h.phnum = r.Read<uint16_t>().value_or(0);
  h.shentsize = r.Read<uint16_t>().value_or(0);
  h.shnum = r.Read<uint16_t>().value_or(0);
  h.shstrndx = r.Read<uint16_t>().value_or(0);

  const uint64_t field_base = h.is64 ? 0x36 : 0x2a;  // offset of e_phentsize
  if (h.phnum != 0 && h.phentsize < (h.is64 ? 56 : 32))
    return HeaderError("program header entry size " + std::to_string(h.phentsize) + " too small",
                       field_base);
  if (h.shnum != 0 && h.shentsize < (h.is64 ? 64 : 40))
    return HeaderError("section header entry size " + std::to_string(h.shentsize) + " too small",
                       field_base + 4);
  // The table ends must be representable; the 16-bit counts bound their size.
  if (!util::CheckedAdd(h.phoff, uint64_t{h.phentsize} * h.phnum))
    return HeaderError("program header offset overflows", h.is64 ? 0x20 : 0x1c);
  if (!util::CheckedAdd(h.shoff, uint64_t{h.shentsize} * h.shnum))
    return HeaderError("section header offset overflows", h.is64 ? 0x28 : 0x20);
  return h;
}

std::vector<Segment> ReadSegments(const Header& header, std::string_view bytes) {
  std::vector<Segment> out;
  for (uint64_t i = 0; i < header.phnum; ++i) {
    auto entry = util::Slice(bytes, i * header.phentsize, header.phentsize);
    if (!entry) break;
    Reader r(*entry, header.big_endian);
    Segment s;
    s.type = r.Read<uint32_t>().value_or(0);
    if (header.is64) {
      r.Skip(4);  // p_flags
      s.offset = r.Read<uint64_t>().value_or(0);
      s.vaddr = r.Read<uint64_t>().value_or(0);
      r.Skip(8);  // p_paddr
      s.filesz = r.Read<uint64_t>().value_or(0);
      s.memsz = r.Read<uint64_t>().value_or(0);
      s.align = r.Read<uint64_t>().value_or(0);
    } else {
      s.offset = r.Read<uint32_t>().value_or(0);
      s.vaddr = r.Read<uint32_t>().value_or(0);
      r.Skip(4);  // p_paddr
      s.filesz = r.Read<uint32_t>().value_or(0);
      s.memsz = r.Read<uint32_t>().value_or(0);
      r.Skip(4);  // p_flags
      s.align = r.Read<uint32_t>().value_or(0);
    }
    out.push_back(s);
  }
  return out;
}

std::vector<Section> ReadSections(const Header& header, std::string_view bytes) {
  std::vector<Section> out;
  for (uint64_t i = 0; i < header.shnum; ++i) {
    auto entry = util::Slice(bytes, i * header.shentsize, header.shentsize);
    if (!entry) break;
    Reader r(*entry, header.big_endian);
    Section s;
    s.name = r.Read<uint32_t>().value_or(0);
    s.type = r.Read<uint32_t>().value_or(0);
    ReadWord(r, header.is64);  // sh_flags
    s.addr = ReadWord(r, header.is64).value_or(0);
    s.offset = ReadWord(r, header.is64).value_or(0);
    s.size = ReadWord(r, header.is64).value_or(0);
    s.link = r.Read<uint32_t>().value_or(0);
    r.Skip(4);                 // sh_info
    ReadWord(r, header.is64);  // sh_addralign
    s.entsize = ReadWord(r, header.is64).value_or(0);
    out.push_back(s);
  }
  return out;
}

std::vector<DynEntry> ReadDynamic(const Header& header, std::string_view bytes) {
  std::vector<DynEntry> out;
  Reader r(bytes, header.big_endian);
  while (out.size() < kMaxEntries) {
    auto tag = ReadWord(r, header.is64);
    auto value = ReadWord(r, header.is64);
    if (!tag || !value) break;
    // d_tag is signed (Elf32_Sword / Elf64_Sxword); sign-extend the 32-bit form.
    int64_t t = header.is64
                    ? static_cast<int64_t>(*tag)
                    : static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(*tag)));
    if (t == kDtNull) break;
    out.push_back({t, *value});
  }
  return out;
}

const Segment* LoadSegmentAt(const std::vector<Segment>& segments, uint64_t offset) {
  for (const auto& s : segments)
    if (s.type == kPtLoad && offset >= s.offset && offset - s.offset < s.filesz) return &s;
  return nullptr;
}

std::optional<uint64_t> AddrToOffset(const std::vector<Segment>& segments, uint64_t addr) {
  for (const auto& s : segments) {
    if (s.type != kPtLoad || addr < s.vaddr) continue;
    uint64_t delta = addr - s.vaddr;
    if (delta < s.filesz) return util::CheckedAdd(s.offset, delta);
  }
  return std::nullopt;
}

DynamicTables LocateTables(const std::vector<Segment>& segments,
                           const std::vector<DynEntry>& dynamic) {
  DynamicTables t;
  for (const auto& d : dynamic) {
    switch (d.tag) {
      case kDtStrtab:
        t.strtab = AddrToOffset(segments, d.value);
        break;
      case kDtSymtab:
        t.symtab = AddrToOffset(segments, d.value);
        break;
      case kDtHash:
        t.hash = AddrToOffset(segments, d.value);
        break;
      case kDtGnuHash:
        t.gnu_hash = AddrToOffset(segments, d.value);
        break;
      case kDtVersym:
        t.versym = AddrToOffset(segments, d.value);
        break;
      case kDtVerdef:
        t.verdef = AddrToOffset(segments, d.value);
        break;
      case kDtVerneed:
        t.verneed = AddrToOffset(segments, d.value);
        break;
      case kDtStrsz:
        t.strsz = d.value;
        break;
      case kDtVerdefnum:
        t.verdefnum = d.value;
        break;
      case kDtVerneednum:
        t.verneednum = d.value;
        break;
      default:
        break;
    }
  }
  return t;
}

std::optional<uint64_t> SymbolCountFromHash(const Header& header, std::string_view hash) {
  // Elf_Hash header: nbucket, nchain (32-bit words on every class but s390x/alpha, which we
  // do not target). nchain equals the number of symbol table entries.
  Reader r(hash, header.big_endian);
  r.Skip(4);
  auto nchain = r.Read<uint32_t>();
  if (!nchain) return std::nullopt;
  return uint64_t{*nchain};
}

std::optional<uint64_t> SymbolCountFromGnuHash(const Header& header, std::string_view table,
                                               uint64_t* used) {
  // Layout (binutils bfd/elflink.c, glibc dl-lookup.c): nbuckets, symoffset, bloom_size,
  // bloom_shift, bloom[bloom_size] (address-sized words), buckets[nbuckets], chain[].
  Reader r(table, header.big_endian);
  auto nbuckets = r.Read<uint32_t>();
  auto symoffset = r.Read<uint32_t>();
  auto bloom_size = r.Read<uint32_t>();
  if (!nbuckets || !symoffset || !bloom_size || !r.Skip(4)) return std::nullopt;
  auto bloom_bytes = util::CheckedMul(*bloom_size, header.WordSize());
  if (!bloom_bytes || !r.Skip(*bloom_bytes)) return std::nullopt;
  uint32_t max_bucket = 0;
  for (uint32_t i = 0; i < *nbuckets; ++i) {
    auto b = r.Read<uint32_t>();
    if (!b) return std::nullopt;
    max_bucket = std::max(max_bucket, *b);
  }
  *used = r.offset();
  if (max_bucket == 0) return uint64_t{*symoffset};
  if (max_bucket < *symoffset) return std::nullopt;
  // Chains start at symoffset; the last entry of a chain has its low bit set.
  uint64_t chain_start = r.offset();
  for (uint64_t idx = max_bucket; idx - max_bucket < kMaxEntries; ++idx) {
    auto pos = util::CheckedAdd(chain_start, (idx - *symoffset) * 4);
    if (!pos || !r.Seek(*pos)) return std::nullopt;
    auto h = r.Read<uint32_t>();
    if (!h) return std::nullopt;
    *used = r.offset();
    if (*h & 1) return idx + 1;
  }
  return std::nullopt;
}

}  // namespace imgcheck::elf::format

// ELF structures normalised once at the boundary: 32/64-bit and both byte orders decode into the
// same 64-bit structs, so Parse and the capturer never look at the file's class or order again.
// Internal to the elf stage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace imgcheck::elf::format {

// Values from the System V gABI and the GNU extensions (elf.h).
inline constexpr uint32_t kPtLoad = 1, kPtDynamic = 2, kPtInterp = 3, kPtNote = 4;
inline constexpr int64_t kDtNull = 0, kDtNeeded = 1, kDtHash = 4, kDtStrtab = 5, kDtSymtab = 6,
                         kDtStrsz = 10, kDtSoname = 14, kDtRpath = 15, kDtRunpath = 29,
                         kDtFlags = 30, kDtGnuHash = 0x6ffffef5, kDtVersym = 0x6ffffff0,
                         kDtFlags1 = 0x6ffffffb, kDtVerdef = 0x6ffffffc, kDtVerdefnum = 0x6ffffffd,
                         kDtVerneed = 0x6ffffffe, kDtVerneednum = 0x6fffffff;
inline constexpr uint32_t kShtDynsym = 11;
inline constexpr uint32_t kNtGnuBuildId = 3;
/// Bound on what any table walk reads, so a hostile count cannot make a loop run for hours.
inline constexpr uint64_t kMaxEntries = 1u << 22;
/// Problems recorded per file at most; past that one line says more were dropped.
inline constexpr size_t kMaxProblems = 64;

struct Header {
  bool is64 = true;
  bool big_endian = false;
  uint16_t type = 0, machine = 0;
  uint64_t phoff = 0, shoff = 0;
  uint16_t ehsize = 0, phentsize = 0, phnum = 0, shentsize = 0, shnum = 0, shstrndx = 0;

  uint64_t PhdrsEnd() const { return phoff + uint64_t{phentsize} * phnum; }
  uint64_t ShdrsEnd() const { return shoff + uint64_t{shentsize} * shnum; }
  /// Size of a symbol table entry (Elf32_Sym / Elf64_Sym).
  uint64_t SymSize() const { return is64 ? 24 : 16; }
  /// Size of an address-sized word.
  uint64_t WordSize() const { return is64 ? 8 : 4; }
};

struct Segment {
  uint32_t type = 0;
  uint64_t offset = 0, vaddr = 0, filesz = 0, memsz = 0, align = 0;
};

struct Section {
  uint32_t name = 0, type = 0;
  uint32_t link = 0;  ///< sh_link: the string table of a symbol table
  uint64_t addr = 0, offset = 0, size = 0, entsize = 0;
};

struct DynEntry {
  int64_t tag = 0;
  uint64_t value = 0;
};

/// "0x1f" for 31: offsets in messages.
std::string Hex(uint64_t v);
/// Lower-case hex of every byte ("\x01\xab" -> "01ab").
std::string HexBytes(std::string_view bytes);

/// True when `bytes` starts with the ELF magic.
bool IsElf(std::string_view bytes);
/// Decodes the ELF header from the file's first bytes (at least 64, or fewer for a short file).
/// Error: a corrupt identification or header, with the offset of the bad field.
util::Expected<Header> ReadHeader(std::string_view bytes);
/// Decodes `header.phnum` program headers from the bytes at header.phoff.
std::vector<Segment> ReadSegments(const Header& header, std::string_view bytes);
/// Decodes section headers from the bytes at header.shoff.
std::vector<Section> ReadSections(const Header& header, std::string_view bytes);
/// Decodes a dynamic section up to DT_NULL.
std::vector<DynEntry> ReadDynamic(const Header& header, std::string_view bytes);
/// The file offset holding virtual address `addr`, through the PT_LOAD segments.
std::optional<uint64_t> AddrToOffset(const std::vector<Segment>& segments, uint64_t addr);
/// The PT_LOAD segment whose file range holds `offset`.
const Segment* LoadSegmentAt(const std::vector<Segment>& segments, uint64_t offset);

/// File offsets of the tables the dynamic section points to (nullopt: absent or unmapped).
struct DynamicTables {
  std::optional<uint64_t> strtab, symtab, hash, gnu_hash, versym, verdef, verneed;
  uint64_t strsz = 0, verdefnum = 0, verneednum = 0;
};
DynamicTables LocateTables(const std::vector<Segment>& segments,
                           const std::vector<DynEntry>& dynamic);

/// Number of dynamic symbols, from a DT_HASH table (its nchain).
std::optional<uint64_t> SymbolCountFromHash(const Header& header, std::string_view hash);
/// Number of dynamic symbols, from a DT_GNU_HASH table: one past the last symbol reached by a
/// bucket's chain, or symoffset when every bucket is empty. `table` runs from the table's start
/// to as far as it was captured; `used` receives how many of its bytes were read.
std::optional<uint64_t> SymbolCountFromGnuHash(const Header& header, std::string_view table,
                                               uint64_t* used);

}  // namespace imgcheck::elf::format

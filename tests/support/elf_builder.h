// Test-only: writes small ELF shared objects field by field, for the classes and byte orders the
// machine's compiler cannot produce (big-endian, hand-made 32-bit) and for corrupting on purpose.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace imgcheck::elf::fixture {

struct ElfSpec {
  bool is64 = true;
  bool big_endian = false;
  uint16_t machine = 62;  // EM_X86_64
  uint16_t type = 3;      // ET_DYN
  std::string soname;
  std::string interpreter;  ///< PT_INTERP (a program); empty for none
  std::vector<std::string> needed;
  std::string rpath, runpath;
  uint64_t flags_1 = 0;
  /// Defined FUNC symbols: "name" (no version), "name@@VERSION" (the default version, one of
  /// version_definitions) or "name@VERSION" (a hidden, non-default one).
  std::vector<std::string> exported;
  /// Undefined FUNC symbols: "name", or "name@VERSION" (a version of version_needs).
  std::vector<std::string> imported;
  std::vector<std::string> weak_imported;  ///< undefined weak FUNC symbols, as imported
  /// DT_VERDEF names, the first one the base (VER_FLG_BASE, the soname by convention).
  std::vector<std::string> version_definitions;
  /// DT_VERNEED: {file, the versions needed from it}.
  std::vector<std::pair<std::string, std::vector<std::string>>> version_needs;
  std::string build_id;        ///< raw NT_GNU_BUILD_ID descriptor bytes; empty for none
  std::string fatbin;          ///< bytes appended in a PT_LOAD, found by magic scan
  bool dynamic_first = false;  ///< put the dynamic section before the tables it points to
                               ///< (as patchelf and some NVIDIA libraries do)
  /// Non-zero: the tables and the dynamic section start at this offset, in a PT_LOAD of their
  /// own after a zero-filled first one (the segment patchelf adds at the end of a large library)
  uint64_t tables_at = 0;
  /// A section header table (.dynstr, .dynsym linked to it, .shstrtab) after the notes, before
  /// the tables: where it stays when patchelf moves the tables to the end of the file.
  bool section_headers = false;
  /// A name that ends another already written is not written again but pointed into its tail
  /// ("time" inside "localtime"), as GNU ld merges .dynstr.
  bool merge_tails = false;
  /// Bytes of unused strings (symbol-name characters) at the start of .dynstr, before the
  /// dynamic section's names: they then sit far from both ends of the table.
  uint64_t filler_strings = 0;
};

/// One fatbin entry to write: device code for one architecture.
struct FatbinSpecEntry {
  bool ptx = false;
  unsigned sm = 0;
  bool compressed = false;
  unsigned major = 1, minor = 8;  ///< PTX ISA version for PTX, code version for cubins
  std::string payload = "device code";
};
/// A fatbin container (header + entries), laid out as nvcc writes it.
std::string BuildFatbin(const std::vector<FatbinSpecEntry>& entries);

/// The file: ELF header, [PT_INTERP,] PT_LOAD (whole file, vaddr == offset), PT_DYNAMIC, PT_NOTE,
/// then the note, .dynstr, .dynsym, DT_HASH, the version tables (DT_VERSYM once a symbol names a
/// version), the dynamic section (or the dynamic section first),
/// the fatbin bytes and the interpreter path. No section headers.
std::string BuildElf(const ElfSpec& spec);

}  // namespace imgcheck::elf::fixture

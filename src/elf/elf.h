// What imgcheck needs to know about an ELF file, read from its captured parts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/capturer.h"
#include "util/error.h"
#include "util/sparse_file.h"

namespace imgcheck::elf {

struct Symbol {
  std::string name;  ///< empty when only its hash was captured (`hash`)
  /// NameHash(name) when the name lies past the bytes the capturer kept of a large string table
  /// and only its hash was taken as it streamed; 0 when `name` holds the name (SymbolNameHash).
  std::string version;          ///< symbol version ("GLIBC_2.34", "libcudnn.so.9"), empty if none
  bool hidden_version = false;  ///< defined version is not the default one ("@" vs "@@")
  bool weak = false;
  /// An undefined STT_NOTYPE symbol: the static linker bound it to no library it was given
  /// (--allow-shlib-undefined), so whatever object of the process defines it provides it.
  bool untyped = false;
  uint64_t hash = 0;
};

/// A DT_VERNEED entry: the versions required from one needed file.
struct VersionNeed {
  std::string file;                   ///< the soname named in the entry
  std::vector<std::string> versions;  ///< version names required from it
};

/// One entry of a CUDA fatbin (.nv_fatbin): device code for one architecture.
struct FatbinEntry {
  enum class Kind : uint8_t { kCubin, kPtx };
  Kind kind = Kind::kCubin;
  unsigned sm = 0;  ///< target architecture, e.g. 80 for sm_80
  bool compressed = false;
  /// PTX entries: the PTX ISA version (8.5 -> 8, 5); cubins: the fatbin code version.
  unsigned version_major = 0, version_minor = 0;
};

/// ELF e_type values (System V ABI, "ELF Header"): a fixed-address executable, and a shared
/// object (libraries, and position-independent executables).
inline constexpr uint16_t kTypeExecutable = 2;    // ET_EXEC
inline constexpr uint16_t kTypeSharedObject = 3;  // ET_DYN

struct ElfInfo {
  bool is64 = true;
  bool big_endian = false;
  uint16_t machine = 0;              ///< e_machine (EM_X86_64 = 62, EM_AARCH64 = 183)
  uint16_t type = 0;                 ///< e_type (kTypeExecutable, kTypeSharedObject)
  std::string interpreter;           ///< PT_INTERP, empty for shared libraries
  std::string soname;                ///< DT_SONAME
  std::vector<std::string> needed;   ///< DT_NEEDED, in order
  std::vector<std::string> rpath;    ///< DT_RPATH split on ':', unexpanded ($ORIGIN kept)
  std::vector<std::string> runpath;  ///< DT_RUNPATH split on ':'
  bool has_runpath = false;          ///< DT_RUNPATH present (even if empty)
  uint64_t flags = 0;                ///< DT_FLAGS
  uint64_t flags_1 = 0;              ///< DT_FLAGS_1 (DF_1_NODEFLIB = 0x800)
  std::string build_id;              ///< hex of NT_GNU_BUILD_ID
  /// Defined dynamic symbols whose names were kept (every one unless has_export_keys).
  std::vector<Symbol> exported;
  std::vector<Symbol> imported;  ///< undefined dynamic symbols (a name, or its hash)
  /// Set: export_keys holds the binding keys (AddExportKeys) of every defined dynamic symbol,
  /// sorted and unique, as the capturer stored them (large objects, whose names may lie past
  /// the bytes it kept). Unset: ExportKeys() derives them from `exported`.
  bool has_export_keys = false;
  std::vector<uint64_t> export_keys;
  /// The problems (also in `problems`) of the DT_NEEDED, DT_SONAME, DT_RPATH and DT_RUNPATH
  /// entries whose strings could not be read ("DT_NEEDED at .dynstr offset 0x... not
  /// captured"): such a library is missing from `needed`, never named "".
  std::vector<std::string> names_unread;
  /// Why the dynamic symbols were not all read (the first problem met reading the dynamic
  /// section, the version tables or the symbol table); empty when every symbol was read.
  std::string symbols_unread;
  std::vector<std::string> version_definitions;  ///< DT_VERDEF names (first is the file's own)
  std::vector<VersionNeed> version_needs;        ///< DT_VERNEED
  std::vector<FatbinEntry> fatbin;               ///< empty when there is no CUDA device code
  /// Parts that could not be read because they were not captured or are inconsistent; the
  /// rest of the info is still valid.
  std::vector<std::string> problems;
  /// The strings and symbols read reached ParseOptions::table_bytes: the rest was not read, so
  /// the info is incomplete (the caller stops: util::LimitExceeded).
  bool table_limit_reached = false;

  bool nodeflib() const { return (flags_1 & 0x800) != 0; }
};

/// 64-bit FNV-1a of a symbol name: symbols are compared by it, never by the name, so a name
/// the capturer did not keep still binds.
uint64_t NameHash(std::string_view name);
/// The hash of a symbol's name: `hash` when only that was captured, else NameHash(name).
inline uint64_t SymbolNameHash(const Symbol& s) {
  return s.name.empty() ? s.hash : NameHash(s.name);
}
/// The key of a name hash bound at `version` (a reference to name@version, or a definition
/// with that version; "" for a definition without version, which glibc binds at any version).
uint64_t VersionedKey(uint64_t name_hash, std::string_view version);
/// Appends the keys a definition answers to: VersionedKey(h, version) always, and h itself
/// (what an unversioned reference looks up) unless the version is hidden ("@", not "@@").
void AddExportKeys(uint64_t name_hash, const std::string& version, bool hidden,
                   std::vector<uint64_t>& keys);
/// Every defined symbol's keys, sorted and unique: `export_keys` when the capture stored them,
/// else computed from `exported`.
std::vector<uint64_t> ExportKeys(const ElfInfo& info);

struct ParseOptions {
  /// Bytes Parse may materialise from the dynamic tables (strings, symbol and version records):
  /// tables may point every entry at one long string. Tables themselves are only viewed, never
  /// copied, so a table that claims more bytes than the file holds costs nothing.
  uint64_t table_bytes = 64u << 20;
};

/// Parses the captured parts of a file. nullopt: not an ELF file ("not mine").
/// Error: an ELF file whose headers are corrupt (message says what and at which offset).
util::Expected<std::optional<ElfInfo>> Parse(const util::SparseFile& file,
                                             const ParseOptions& options = {});

/// A capturer that keeps exactly the ranges Parse needs (headers, dynamic section, dynamic
/// symbol and version tables, notes, fatbin headers) and never a whole large file. Feed returns
/// false after the first 4 bytes of a non-ELF file. Memory: at most 44 MiB while streaming
/// (16 MiB for real libraries), and after Finish only the bytes Parse reads (0.08% of
/// libcublasLt.so.13). A string table that runs past CaptureLimits::prefix is hashed as it
/// streams instead (Symbol::hash, ElfInfo::export_keys, kept in the result's annex), but for the
/// strings that may be the dynamic section's names (sonames, search paths, version names), kept
/// whole. Details in capture.cpp.
struct CaptureLimits {
  /// The most of the file's start kept whole (headers, symbol and version tables, strings);
  /// past it a string table's symbol names are hashed as they stream, not kept.
  uint64_t prefix = 16u << 20;
};
std::unique_ptr<util::Capturer> MakeCapturer(const CaptureLimits& limits = {});

}  // namespace imgcheck::elf

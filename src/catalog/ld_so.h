// The image's loader configuration: /etc/ld.so.cache (both glibc formats) and /etc/ld.so.conf,
// parsed as glibc reads them (the loader stage searches the cache with LdCacheFile::Lookup).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "image/tree.h"
#include "util/error.h"
#include "util/limits.h"

namespace imgcheck::catalog {

/// ld.so.cache entry flags (glibc sysdeps/generic/ldconfig.h): the low byte is the type,
/// the next one the architecture/ABI (each modelled ABI's are in elf::kAbis).
inline constexpr int32_t kCacheFlagElfLibc6 = 0x0003;
/// Bit of LdCacheRecord::hwcap marking a glibc-hwcaps entry (DL_CACHE_HWCAP_EXTENSION); the
/// low 32 bits then index the glibc-hwcaps extension's names.
inline constexpr uint64_t kCacheHwcapExtension = uint64_t{1} << 62;

struct LdCacheRecord {
  std::string name;           ///< key: the soname ("libcudnn.so.9")
  std::string path;           ///< value: the file the loader opens
  int32_t flags = 0;          ///< type | architecture: 0x0303 x86-64, 0x0a03 aarch64, 0x0003 i386
  uint32_t osversion = 0;     ///< new format only
  uint64_t hwcap = 0;         ///< new format only
  std::string hwcaps_subdir;  ///< glibc-hwcaps name ("x86-64-v3") of an extension entry, else ""
};

struct LdCacheFile {
  enum class Format : uint8_t { kOld, kNew, kCombined };
  Format format = Format::kNew;
  bool big_endian = false;
  std::vector<LdCacheRecord> entries;  ///< in file order; for kCombined, the new part's entries
  std::string generator;               ///< generator extension ("ldconfig (GNU libc) 2.36"), if any

  /// What glibc's _dl_load_cache_lookup returns for `name` (exact key match): among entries
  /// whose flags are `flags` (or 1, ELF libc5-era "any"), a glibc-hwcaps entry whose subdir is
  /// listed in `hwcaps` (earlier = preferred) wins over a baseline entry (hwcap 0); legacy
  /// hwcap entries are ignored (glibc >= 2.37). Null when none.
  const LdCacheRecord* Lookup(std::string_view name, int32_t flags,
                              const std::vector<std::string>& hwcaps) const;
};

/// The cache flags glibc's loader accepts for objects of this e_machine / class.
int32_t CacheFlagsFor(uint16_t machine, bool is64);

/// Parses an ld.so.cache image: old "ld.so-1.7.0", new "glibc-ld.so.cache1.1", or the old
/// format followed by the new one. Error (with the offset) for a truncated or inconsistent file
/// or one that is not a cache at all. Entries may share strings, so what the entries expand to
/// (records and their strings) is bounded by limits.metadata_bytes: util::LimitExceeded past it.
util::Expected<LdCacheFile> ParseLdCache(std::string_view bytes, const util::Limits& limits = {});

/// One directory line of ld.so.conf, with where it was written.
struct LdSoConfDir {
  std::string dir;   ///< normalised, no trailing slash
  std::string file;  ///< the conf file that names it
  int line = 0;
  int layer = -1;  ///< layer that wrote `file`
};

struct LdSoConf {
  std::vector<LdSoConfDir> dirs;              ///< in ldconfig's order, duplicates kept out
  std::vector<std::string> files;             ///< every conf file read, in order
  std::vector<util::Diagnostic> diagnostics;  ///< unreadable includes, include loops
};

/// Reads `path` (normally /etc/ld.so.conf) and its `include` globs from the image, as ldconfig
/// does: '#' comments, `include PATTERN...` (a relative pattern is relative to the including
/// file's directory; matches sorted), `hwcap` lines ignored, one directory per other line
/// (a legacy "=TYPE" suffix dropped). Files are read from the tree's captured content, each at
/// most once. util::LimitExceeded past limits.include_depth nested includes or
/// limits.include_files files read.
LdSoConf ReadLdSoConf(const image::Tree& tree, const util::Limits& limits = {},
                      std::string_view path = "/etc/ld.so.conf");

}  // namespace imgcheck::catalog

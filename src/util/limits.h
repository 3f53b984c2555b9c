// The resource model: every quantity an image (or a registry) controls that could make a scan
// take unbounded memory or time has one bound here, and the flag that raises it. A bound that is
// reached stops the run with one line naming the limit and the flag (exit 2): a partial scan
// that looks clean would be worse than none.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace imgcheck::util {

struct Limits {
  // Image reading (src/image).
  uint64_t files = 1'000'000;            ///< --max-files: entries of all layers together
  uint64_t name_bytes = 128u << 20;      ///< --max-names-mb: bytes of paths and link targets
  uint64_t captured_bytes = 256u << 20;  ///< --max-captured-mb: file contents kept (all layers)
  uint64_t zstd_window = 128u << 20;     ///< --max-zstd-window-mb: a zstd frame's window
  /// --max-spool-mb: a compressed image archive, decompressed once to a private temporary file
  uint64_t spool_bytes = uint64_t{16} << 30;
  int read_timeout_s = 60;  ///< --read-timeout: seconds of waiting for less than 1 KiB: stalled
  /// --min-rate: bytes a second a registry must average over each --read-timeout of waiting
  /// (a transfer below it is abandoned, to be retried); 0: the 1 KiB of read_timeout_s only
  uint64_t min_rate = 0;
  int deadline_s = 3600;  ///< --deadline: a whole image read from a registry
  // What the catalog reads (src/catalog, src/elf).
  uint64_t metadata_bytes = 64u << 20;   ///< --max-metadata-mb: one package metadata file
  uint64_t elf_table_bytes = 64u << 20;  ///< --max-elf-table-mb: one ELF's dynamic tables
  int include_depth = 16;                ///< --max-include-depth: ld.so.conf include nesting
  uint64_t include_files = 4096;         ///< --max-include-files: ld.so.conf files read, each once
  // The loader simulation (src/loader).
  uint64_t loader_objects = 20'000;  ///< --max-loader-objects: objects in one link map
  /// --max-loader-work: objects mapped and candidate files tried in all the link maps of one
  /// scan together (each consumer has its own link map, so a chain of libraries that each
  /// link CUDA costs the square of its length).
  uint64_t loader_work = 1'000'000;
  /// --max-search-dirs: directories of one LD_LIBRARY_PATH, DT_RPATH or DT_RUNPATH list, after
  /// duplicates are dropped.
  uint64_t search_dirs = 4096;
};

/// Throws util::Fatal: "<what> exceeds imgcheck's limit of <limit> (raise it with <flag>)".
[[noreturn]] void LimitExceeded(std::string_view what, std::string_view limit,
                                std::string_view flag);
/// "64 MiB": a byte limit as its --max-*-mb flag takes it ("65536 bytes" when not whole MiB).
std::string MiBText(uint64_t bytes);

}  // namespace imgcheck::util

// Host files imgcheck reads itself (rules, configuration, credentials), never image content:
// that is read through image::Tree and its captured bytes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>

#include "util/error.h"

namespace imgcheck::util {

/// The whole of the regular file `path`. Errors: "cannot read PATH: REASON" when it cannot be
/// opened or read (or is a directory), "PATH is larger than N bytes" past `max_bytes`.
Expected<std::string> ReadFile(const std::filesystem::path& path,
                               size_t max_bytes = std::numeric_limits<size_t>::max());

/// Writes `bytes` to `path` through a temporary file in the same directory (fsync'd, then
/// renamed over `path`), so readers see the old file or the new one, never a part. Creates
/// missing parent directories. util::Fatal ("cannot write PATH: REASON") on failure.
void WriteFileAtomic(const std::filesystem::path& path, std::string_view bytes);

/// A file descriptor, closed when the object dies.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/// A regular file opened for reading, and its size when it was opened.
struct RegularFile {
  UniqueFd fd;
  uint64_t size = 0;
};

/// Opens the regular file `name` beneath the directory `root` (the files of an OCI layout, the
/// layer cache): `name` is relative and climbs nowhere ("..", a leading '/' are refused), no
/// symbolic link is followed on the way (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where
/// the kernel has it, else one component at a time with O_NOFOLLOW), and nothing blocks: a FIFO,
/// a device or a directory is refused after fstat, never read. The error names `root/name` and
/// why; `error_number` (optional) receives the errno behind it (ENOENT: missing).
Expected<RegularFile> OpenRegularBeneath(const std::filesystem::path& root, std::string_view name,
                                         int* error_number = nullptr);
/// The same for a file the user named (an archive on the command line): its links are followed,
/// but it must be a regular file, and opening it never blocks.
Expected<RegularFile> OpenRegular(const std::filesystem::path& path, int* error_number = nullptr);

}  // namespace imgcheck::util

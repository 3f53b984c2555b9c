#include "util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace imgcheck::util {

Expected<std::string> ReadFile(const std::filesystem::path& path, size_t max_bytes) {
  auto fail = [&](int error) {
    return MakeError("cannot read " + path.string() + ": " + std::strerror(error));
  };
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(errno);
  std::string out;
  struct stat st {};
  int error = 0;
  if (fstat(fd, &st) != 0) {
    error = errno;
  } else if (S_ISDIR(st.st_mode)) {
    error = EISDIR;
  } else {
    char buf[1 << 16];
    for (;;) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error = errno;
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > max_bytes) break;
    }
  }
  close(fd);
  if (error != 0) return fail(error);
  if (out.size() > max_bytes)
    return MakeError(path.string() + " is larger than " + std::to_string(max_bytes) + " bytes");
  return out;
}

}  // namespace imgcheck::util

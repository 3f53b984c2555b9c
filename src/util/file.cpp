#include "util/file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

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

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.release();
  }
  return *this;
}

namespace {

// O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused after fstat anyway).
constexpr int kOpenFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;

const char* FileTypeName(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFIFO:
      return "a FIFO";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFDIR:
      return "a directory";
    case S_IFSOCK:
      return "a socket";
    case S_IFLNK:
      return "a symbolic link";
    default:
      return "not a regular file";
  }
}

std::string Reason(int error) {
  switch (error) {
    case ENOENT:
      return "missing";
    case ELOOP:
      return "is a symbolic link or lies behind one (links are not followed here)";
    case EXDEV:
      return "leads outside its directory";
    default:
      return std::strerror(error);
  }
}

// Checks that `fd` is a regular file and takes it over.
Expected<RegularFile> TakeRegular(int fd, const std::string& what, int* error_number) {
  UniqueFd owned(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    if (error_number) *error_number = errno;
    return MakeError(what + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    if (error_number) *error_number = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    return MakeError(what + ": is " + FileTypeName(st.st_mode) + ", not a regular file");
  }
  return RegularFile{std::move(owned), static_cast<uint64_t>(st.st_size)};
}

// openat2(2) confined beneath `dir`, no links at all; -1 with errno ENOSYS where the kernel (or a
// seccomp filter) does not have it.
int OpenAt2Beneath(int dir, const std::string& rel) {
#ifdef SYS_openat2
  struct open_how how {};
  how.flags = static_cast<uint64_t>(kOpenFlags | O_NOFOLLOW);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0; attempt < 8; ++attempt) {
    long fd = syscall(SYS_openat2, dir, rel.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EAGAIN && errno != EINTR) return -1;  // EAGAIN: a concurrent rename; retry
  }
  return -1;
#else
  errno = ENOSYS;
  return -1;
#endif
}

// The same, one component at a time: each directory opened with O_NOFOLLOW beneath the last.
int OpenByComponents(int dir, const std::vector<std::string>& parts) {
  UniqueFd held;
  int at = dir;
  for (size_t i = 0; i < parts.size(); ++i) {
    bool last = i + 1 == parts.size();
    int fd =
        openat(at, parts[i].c_str(),
               last ? kOpenFlags | O_NOFOLLOW : O_RDONLY | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0) {
      int error = errno;
      struct stat st {};
      // O_DIRECTORY|O_NOFOLLOW on a link may say ENOTDIR: name the link.
      if (error == ENOTDIR && fstatat(at, parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode))
        error = ELOOP;
      errno = error;
      return -1;
    }
    if (last) return fd;
    held = UniqueFd(fd);
    at = fd;
  }
  errno = ENOENT;
  return -1;
}

}  // namespace

Expected<RegularFile> OpenRegularBeneath(const std::filesystem::path& root, std::string_view name,
                                         int* error_number) {
  std::string what = (root / std::string(name)).string();
  auto fail = [&](int error) {
    if (error_number) *error_number = error;
    return MakeError(what + ": " + Reason(error));
  };
  std::vector<std::string> parts;
  if (!name.empty() && name.front() == '/') return fail(EXDEV);
  for (size_t start = 0; start <= name.size();) {
    size_t end = std::min(name.find('/', start), name.size());
    std::string part(name.substr(start, end - start));
    if (part == "..") return fail(EXDEV);
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    start = end + 1;
  }
  if (parts.empty()) return fail(EISDIR);
  int dir = open(root.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECTORY);
  if (dir < 0) return fail(errno);
  UniqueFd dir_fd(dir);
  std::string rel;
  for (const std::string& part : parts) rel += (rel.empty() ? "" : "/") + part;
  int fd = OpenAt2Beneath(dir, rel);
  if (fd < 0 && (errno == ENOSYS || errno == EPERM || errno == EAGAIN))
    fd = OpenByComponents(dir, parts);
  if (fd < 0) return fail(errno);
  return TakeRegular(fd, what, error_number);
}

Expected<RegularFile> OpenRegular(const std::filesystem::path& path, int* error_number) {
  int fd = open(path.c_str(), kOpenFlags);
  if (fd < 0) {
    if (error_number) *error_number = errno;
    return MakeError(path.string() + ": " + Reason(errno));
  }
  return TakeRegular(fd, path.string(), error_number);
}

}  // namespace imgcheck::util

namespace imgcheck::util {

void WriteFileAtomic(const std::filesystem::path& path, std::string_view bytes) {
  auto fail = [&path](int err) {
    throw Fatal("cannot write " + path.string() + ": " + std::strerror(err));
  };
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) fail(ec.value());
  std::string tmp = path.string() + ".tmp." + std::to_string(getpid());
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (fd.get() < 0) fail(errno);
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      unlink(tmp.c_str());
      fail(err);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd.get()) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    fail(err);
  }
}

}  // namespace imgcheck::util

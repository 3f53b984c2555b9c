#include "image/store.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "util/error.h"
#include "util/path.h"

namespace imgcheck::image {

namespace {

namespace fs = std::filesystem;

constexpr int kMaxMemberLinks = 8;

std::string ReadAll(BlobReader& r, uint64_t limit, const std::string& what) {
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = r.Read(buf, sizeof buf)) > 0) {
    if (out.size() + n > limit)
      throw util::Fatal(what + ": larger than the limit of " + std::to_string(limit) + " bytes");
    out.append(buf, n);
  }
  return out;
}

class FdReader : public BlobReader {
 public:
  FdReader(int fd, std::string what) : fd_(fd), what_(std::move(what)) {}
  ~FdReader() override { close(fd_); }
  size_t Read(char* buf, size_t n) override {
    while (true) {
      ssize_t got = read(fd_, buf, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) throw util::Fatal(what_ + ": read error: " + std::strerror(errno));
    }
  }

 private:
  int fd_;
  std::string what_;
};

class DirStore : public FileStore {
 public:
  explicit DirStore(fs::path root) : root_(std::move(root)) {}
  bool Has(const std::string& name) override {
    auto clean = CleanMemberName(name);
    std::error_code ec;
    return clean && fs::is_regular_file(root_ / *clean, ec);
  }
  std::string Read(const std::string& name, uint64_t limit) override {
    return ReadAll(*Open(name), limit, Where(name));
  }
  std::unique_ptr<BlobReader> Open(const std::string& name) override {
    auto clean = CleanMemberName(name);
    if (!clean) throw util::Fatal(Describe() + ": refusing name outside the layout: " + name);
    fs::path p = root_ / *clean;
    int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      throw util::Fatal(Where(name) +
                        (errno == ENOENT ? ": missing" : std::string(": ") + std::strerror(errno)));
    }
    return std::make_unique<FdReader>(fd, Where(name));
  }
  uint64_t Size(const std::string& name) override {
    auto clean = CleanMemberName(name);
    if (!clean) throw util::Fatal(Describe() + ": refusing name outside the layout: " + name);
    std::error_code ec;
    uint64_t size = fs::file_size(root_ / *clean, ec);
    if (ec)
      throw util::Fatal(Where(name) + (ec == std::errc::no_such_file_or_directory
                                           ? ": missing"
                                           : ": " + ec.message()));
    return size;
  }
  std::string Describe() const override { return root_.string(); }

 private:
  std::string Where(const std::string& name) const { return (root_ / name).string(); }
  fs::path root_;
};

using ArchivePtr = std::unique_ptr<struct archive, decltype(&archive_read_free)>;

// Reads one member's data, with the archive positioned at it.
class MemberReader : public BlobReader {
 public:
  MemberReader(ArchivePtr a, std::string what) : a_(std::move(a)), what_(std::move(what)) {}
  size_t Read(char* buf, size_t n) override {
    la_ssize_t got = archive_read_data(a_.get(), buf, n);
    if (got < 0) throw util::Fatal(what_ + ": " + archive_error_string(a_.get()));
    return static_cast<size_t>(got);
  }

 private:
  ArchivePtr a_;
  std::string what_;
};

class TarStore : public FileStore {
 public:
  explicit TarStore(fs::path path) : path_(std::move(path)) {
    std::error_code ec;
    if (!fs::is_regular_file(path_, ec))
      throw util::Fatal(path_.string() + ": no such archive file");
  }
  bool Has(const std::string& name) override {
    auto clean = CleanMemberName(name);
    return clean && Seek(*clean, false).has_value();
  }
  std::string Read(const std::string& name, uint64_t limit) override {
    return ReadAll(*Open(name), limit, Where(name));
  }
  std::unique_ptr<BlobReader> Open(const std::string& name) override {
    Member m = Find(name);
    return std::make_unique<MemberReader>(std::move(m.archive), Where(name));
  }
  uint64_t Size(const std::string& name) override { return Find(name).size; }
  std::string Describe() const override { return path_.string(); }

 private:
  // An archive positioned at a member's data.
  struct Member {
    ArchivePtr archive;
    uint64_t size = 0;
  };

  std::string Where(const std::string& name) const { return path_.string() + ":" + name; }

  Member Find(const std::string& name) {
    auto clean = CleanMemberName(name);
    if (!clean)
      throw util::Fatal(Describe() + ": refusing member name outside the archive: " + name);
    std::optional<Member> m = Seek(*clean, true);
    if (!m) throw util::Fatal(Where(name) + ": missing");
    return std::move(*m);
  }

  // Scans the archive for member `name` (following member links).
  std::optional<Member> Seek(std::string name, bool throw_on_corrupt) {
    for (int hops = 0; hops <= kMaxMemberLinks; ++hops) {
      ArchivePtr a(archive_read_new(), archive_read_free);
      archive_read_support_format_tar(a.get());
      archive_read_support_format_gnutar(a.get());
      archive_read_support_filter_gzip(a.get());
      archive_read_support_filter_zstd(a.get());
      if (archive_read_open_filename(a.get(), path_.c_str(), 1 << 16) != ARCHIVE_OK)
        throw util::Fatal(path_.string() +
                          ": not a readable tar archive: " + archive_error_string(a.get()));
      struct archive_entry* e;
      std::optional<std::string> next;
      while (true) {
        int rc = archive_read_next_header(a.get(), &e);
        if (rc == ARCHIVE_EOF) return std::nullopt;
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {  // RETRY too: a damaged header
          if (!throw_on_corrupt) return std::nullopt;
          throw util::Fatal(path_.string() +
                            ": corrupt tar archive: " + archive_error_string(a.get()));
        }
        const char* raw = archive_entry_pathname(e);
        auto member = raw ? CleanMemberName(raw) : std::nullopt;
        if (!member || *member != name) continue;
        if (const char* hard = archive_entry_hardlink(e); hard != nullptr) {
          next = CleanMemberName(hard);
        } else if (archive_entry_filetype(e) == AE_IFLNK) {
          const char* target = archive_entry_symlink(e);
          std::string dir(util::DirName("/" + name));
          if (target != nullptr && target[0] != '/')
            next = CleanMemberName(util::JoinPath(dir, target).substr(1));
        } else if (archive_entry_filetype(e) == AE_IFREG) {
          auto size = static_cast<uint64_t>(std::max<la_int64_t>(0, archive_entry_size(e)));
          return Member{std::move(a), size};
        } else {
          return std::nullopt;
        }
        break;
      }
      if (!next) return std::nullopt;  // a link that leaves the archive
      name = *next;
    }
    throw util::Fatal(Where(name) + ": too many links between archive members");
  }

  fs::path path_;
};

}  // namespace

std::optional<std::string> CleanMemberName(const std::string& name) {
  if (name.empty() || name.front() == '/') return std::nullopt;
  int depth = 0;
  for (const std::string& part : util::Split(name, '/')) {
    if (part == "..") {
      if (--depth < 0) return std::nullopt;
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
  }
  return util::NormalizePath(name).substr(1);
}

std::unique_ptr<FileStore> OpenDirStore(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw util::Fatal(root.string() + ": no such directory");
  return std::make_unique<DirStore>(root);
}

std::unique_ptr<FileStore> OpenTarStore(const fs::path& path) {
  return std::make_unique<TarStore>(path);
}

}  // namespace imgcheck::image

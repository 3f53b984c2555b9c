#include "image/store.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "util/error.h"
#include "util/file.h"
#include "util/limits.h"
#include "util/path.h"

namespace imgcheck::image {

namespace {

namespace fs = std::filesystem;

constexpr int kMaxMemberLinks = 8;
// A member that cannot be read in place (a GNU sparse one) is read by reading the archive again
// up to it. Real images have at most ~128 layers; past this many reads, stop.
constexpr int kMaxCompressedRescans = 512;
constexpr size_t kArchiveBlock = 1 << 16;

std::string ReadAll(BlobReader& r, uint64_t limit, const std::string& what) {
  if (std::optional<uint64_t> size = r.Size(); size && *size > limit)
    throw util::Fatal(what + ": larger than the limit of " + std::to_string(limit) + " bytes");
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

// `size` bytes of a file from `offset` on, by pread: readers on several threads share the
// descriptor.
class FdReader : public BlobReader {
 public:
  FdReader(std::shared_ptr<const util::UniqueFd> fd, uint64_t offset, uint64_t size,
           std::string what)
      : fd_(std::move(fd)), at_(offset), end_(offset + size), size_(size), what_(std::move(what)) {}
  size_t Read(char* buf, size_t n) override {
    n = static_cast<size_t>(std::min<uint64_t>(n, end_ - at_));
    while (n > 0) {
      ssize_t got = pread(fd_->get(), buf, n, static_cast<off_t>(at_));
      if (got >= 0) {
        at_ += static_cast<uint64_t>(got);
        return static_cast<size_t>(got);
      }
      if (errno != EINTR) throw util::Fatal(what_ + ": read error: " + std::strerror(errno));
    }
    return 0;
  }
  std::optional<uint64_t> Size() const override { return size_; }

 private:
  std::shared_ptr<const util::UniqueFd> fd_;
  uint64_t at_, end_, size_;
  std::string what_;
};

class DirStore : public FileStore {
 public:
  explicit DirStore(fs::path root) : root_(std::move(root)) {}
  bool Has(const std::string& name) override {
    auto clean = CleanMemberName(name);
    int error = 0;
    // Anything there but missing counts: reading it says what is wrong with it.
    return clean && (util::OpenRegularBeneath(root_, *clean, &error) || error != ENOENT);
  }
  std::string Read(const std::string& name, uint64_t limit) override {
    return ReadAll(*Open(name), limit, Where(name));
  }
  std::unique_ptr<BlobReader> Open(const std::string& name) override {
    util::RegularFile f = OpenFile(name);
    uint64_t size = f.size;
    return std::make_unique<FdReader>(std::make_shared<const util::UniqueFd>(std::move(f.fd)), 0,
                                      size, Where(name));
  }
  uint64_t Size(const std::string& name) override { return OpenFile(name).size; }
  std::string Describe() const override { return root_.string(); }

 private:
  // Regular files inside the layout only, reached through no link (util/file.h).
  util::RegularFile OpenFile(const std::string& name) {
    auto clean = CleanMemberName(name);
    if (!clean) throw util::Fatal(Describe() + ": refusing name outside the layout: " + name);
    util::Expected<util::RegularFile> f = util::OpenRegularBeneath(root_, *clean);
    if (!f) throw util::Fatal(f.error().message);
    return std::move(*f);
  }
  std::string Where(const std::string& name) const { return (root_ / name).string(); }
  fs::path root_;
};

using ArchivePtr = std::unique_ptr<struct archive, decltype(&archive_read_free)>;

// libarchive's input: the archive's descriptor read by pread from an offset of its own, so
// that readers on several threads share one descriptor (opened once, checked once).
struct ArchiveFile {
  std::shared_ptr<const util::UniqueFd> fd;
  uint64_t size = 0;
  uint64_t offset = 0;
  std::unique_ptr<char[]> block = std::make_unique<char[]>(kArchiveBlock);

  static la_ssize_t Read(struct archive* a, void* client, const void** out) {
    auto* f = static_cast<ArchiveFile*>(client);
    while (true) {
      ssize_t n = pread(f->fd->get(), f->block.get(), kArchiveBlock, static_cast<off_t>(f->offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        archive_set_error(a, errno, "read error: %s", std::strerror(errno));
        return -1;
      }
      f->offset += static_cast<uint64_t>(n);
      *out = f->block.get();
      return n;
    }
  }
  static la_int64_t Skip(struct archive*, void* client, la_int64_t request) {
    auto* f = static_cast<ArchiveFile*>(client);
    uint64_t n = std::min(static_cast<uint64_t>(std::max<la_int64_t>(0, request)),
                          f->size - std::min(f->size, f->offset));
    f->offset += n;
    return static_cast<la_int64_t>(n);
  }
};

// An archive reader over `file`, with its input (which it points to) kept beside it.
struct OpenArchive {
  std::unique_ptr<ArchiveFile> input;
  ArchivePtr archive{nullptr, archive_read_free};
};

// Reads one member's data, with the archive positioned at it.
class MemberReader : public BlobReader {
 public:
  MemberReader(OpenArchive a, uint64_t size, std::string what)
      : a_(std::move(a)), size_(size), what_(std::move(what)) {}
  size_t Read(char* buf, size_t n) override {
    la_ssize_t got = archive_read_data(a_.archive.get(), buf, n);
    if (got < 0) throw util::Fatal(what_ + ": " + archive_error_string(a_.archive.get()));
    return static_cast<size_t>(got);
  }
  std::optional<uint64_t> Size() const override { return size_; }

 private:
  OpenArchive a_;
  uint64_t size_;
  std::string what_;
};

// An anonymous file for a decompressed archive: O_TMPFILE in the temporary directory (mode
// 0600, no name, gone when closed), or where that is not supported a mkstemp file unlinked at
// once.
util::UniqueFd OpenSpoolFile() {
  std::error_code ec;
  fs::path dir = fs::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    std::string name = (dir / "imgcheck-spool-XXXXXX").string();
    fd = mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) unlink(name.c_str());
  }
  if (fd < 0)
    throw util::Fatal("cannot create a temporary file in " + dir.string() + ": " +
                      std::strerror(errno));
  return util::UniqueFd(fd);
}

// The members of a tar, indexed in one pass when the store opens: looking a member up never
// reads the archive again, and a member is read in place by offset. A compressed archive is
// first decompressed once into a private temporary file (bounded by --max-spool-mb), which is
// then read in place: never decompressed again per blob.
class TarStore : public FileStore {
 public:
  TarStore(fs::path path, const util::Limits& limits) : path_(std::move(path)) {
    util::Expected<util::RegularFile> f = util::OpenRegular(path_);
    if (!f) throw util::Fatal(f.error().message);
    size_ = f->size;
    fd_ = std::make_shared<const util::UniqueFd>(std::move(f->fd));
    // Spooled only when a tar header follows the compression (a bare PATH is probed this way
    // for its transport: a compressed file that is no tar is not decompressed whole).
    OpenArchive probe = Start();
    struct archive_entry* first;
    if (archive_filter_code(probe.archive.get(), 0) != ARCHIVE_FILTER_NONE) {
      int rc = archive_read_next_header(probe.archive.get(), &first);
      if (rc == ARCHIVE_OK || rc == ARCHIVE_WARN) Spool(limits);
    }
    Index(limits);
  }
  bool Has(const std::string& name) override {
    auto clean = CleanMemberName(name);
    return clean && Resolve(*clean) != nullptr;
  }
  std::string Read(const std::string& name, uint64_t limit) override {
    return ReadAll(*Open(name), limit, Where(name));
  }
  std::unique_ptr<BlobReader> Open(const std::string& name) override {
    const Member& m = Find(name);
    if (m.in_place) return std::make_unique<FdReader>(fd_, m.data_offset, m.size, Where(name));
    if (++rescans_ > kMaxCompressedRescans)
      throw util::Fatal(path_.string() + ": archive read more than " +
                        std::to_string(kMaxCompressedRescans) +
                        " times (once per blob stored out of place, such as a sparse member)");
    OpenArchive a = Start();
    struct archive_entry* e;
    for (uint64_t i = 0; i <= m.ordinal; ++i)
      if (int rc = archive_read_next_header(a.archive.get(), &e);
          rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
        throw util::Fatal(path_.string() +
                          ": corrupt tar archive: " + archive_error_string(a.archive.get()));
    return std::make_unique<MemberReader>(std::move(a), m.size, Where(name));
  }
  uint64_t Size(const std::string& name) override { return Find(name).size; }
  std::string Describe() const override { return path_.string(); }

 private:
  struct Member {
    uint64_t ordinal = 0;  // its place in the archive
    unsigned type = 0;     // AE_IF*; 0 for a hard link
    uint64_t size = 0;
    uint64_t data_offset = 0;
    bool in_place = false;            // its data lies whole at data_offset of the file
    std::optional<std::string> link;  // a link's member name; nullopt when it leaves the archive
  };

  std::string Where(const std::string& name) const { return path_.string() + ":" + name; }

  OpenArchive Start() const {
    OpenArchive a;
    a.input = std::make_unique<ArchiveFile>();
    a.input->fd = fd_;
    a.input->size = size_;
    a.archive.reset(archive_read_new());
    archive_read_support_format_tar(a.archive.get());
    archive_read_support_format_gnutar(a.archive.get());
    archive_read_support_filter_gzip(a.archive.get());
    archive_read_support_filter_zstd(a.archive.get());
    archive_read_set_read_callback(a.archive.get(), ArchiveFile::Read);
    archive_read_set_skip_callback(a.archive.get(), ArchiveFile::Skip);
    archive_read_set_callback_data(a.archive.get(), a.input.get());
    if (archive_read_open1(a.archive.get()) != ARCHIVE_OK)
      throw util::Fatal(path_.string() +
                        ": not a readable tar archive: " + archive_error_string(a.archive.get()));
    return a;
  }

  // Decompresses the archive into a spool file, which then stands in for it.
  void Spool(const util::Limits& limits) {
    util::UniqueFd out = OpenSpoolFile();
    ArchiveFile input;
    input.fd = fd_;
    input.size = size_;
    ArchivePtr raw(archive_read_new(), archive_read_free);
    archive_read_support_format_raw(raw.get());
    archive_read_support_filter_gzip(raw.get());
    archive_read_support_filter_zstd(raw.get());
    archive_read_set_read_callback(raw.get(), ArchiveFile::Read);
    archive_read_set_skip_callback(raw.get(), ArchiveFile::Skip);
    archive_read_set_callback_data(raw.get(), &input);
    struct archive_entry* e;
    if (archive_read_open1(raw.get()) != ARCHIVE_OK ||
        archive_read_next_header(raw.get(), &e) != ARCHIVE_OK)
      throw util::Fatal(path_.string() +
                        ": not a readable compressed archive: " + archive_error_string(raw.get()));
    std::vector<char> buf(kArchiveBlock * 4);
    uint64_t total = 0;
    for (;;) {
      la_ssize_t n = archive_read_data(raw.get(), buf.data(), buf.size());
      if (n < 0)
        throw util::Fatal(path_.string() +
                          ": corrupt compressed archive: " + archive_error_string(raw.get()));
      if (n == 0) break;
      total += static_cast<uint64_t>(n);
      if (total > limits.spool_bytes)
        util::LimitExceeded("the decompressed size of " + path_.string(),
                            util::MiBText(limits.spool_bytes), "--max-spool-mb");
      for (la_ssize_t done = 0; done < n;) {
        ssize_t w = write(out.get(), buf.data() + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0)
          throw util::Fatal(path_.string() +
                            ": cannot decompress to a temporary file: " + std::strerror(errno));
        done += w;
      }
    }
    fd_ = std::make_shared<const util::UniqueFd>(std::move(out));
    size_ = total;
  }

  // One pass over the archive. Members after a damaged header are not indexed; looking one of
  // them up reports the damage. The first member of a name wins.
  void Index(const util::Limits& limits) {
    OpenArchive a = Start();
    struct archive* ar = a.archive.get();
    bool compressed = archive_filter_code(ar, 0) != ARCHIVE_FILTER_NONE;
    Member* previous = nullptr;
    uint64_t name_bytes = 0;
    for (uint64_t ordinal = 0;; ++ordinal) {
      struct archive_entry* e;
      int rc = archive_read_next_header(ar, &e);
      if (previous) {
        // Stored whole and in order (not a GNU sparse member): then it can be read in place.
        // The next header (or the end marker) starts right after its data and padding.
        uint64_t stored =
            static_cast<uint64_t>(archive_read_header_position(ar)) - previous->data_offset;
        previous->in_place = !compressed && stored >= previous->size &&
                             stored - previous->size < 512 &&
                             previous->data_offset + previous->size <= size_;
        previous = nullptr;
      }
      if (rc == ARCHIVE_EOF) return;
      if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
        damage_ = path_.string() + ": corrupt tar archive: " + archive_error_string(ar);
        return;
      }
      if (ordinal >= limits.files)
        util::LimitExceeded("the members of " + path_.string(), std::to_string(limits.files),
                            "--max-files");
      const char* raw = archive_entry_pathname(e);
      auto name = raw ? CleanMemberName(raw) : std::nullopt;
      if (!name) continue;
      name_bytes += name->size();
      Member m;
      m.ordinal = ordinal;
      if (const char* hard = archive_entry_hardlink(e); hard != nullptr) {
        m.link = CleanMemberName(hard);
      } else {
        m.type = archive_entry_filetype(e);
        if (m.type == AE_IFLNK) {
          const char* target = archive_entry_symlink(e);
          std::string dir(util::DirName("/" + *name));
          if (target != nullptr && target[0] != '/')
            m.link = CleanMemberName(util::JoinPath(dir, target).substr(1));
          else
            m.link = std::nullopt;
        }
      }
      if (m.link) name_bytes += m.link->size();
      if (name_bytes > limits.name_bytes)
        util::LimitExceeded("the member names of " + path_.string(),
                            util::MiBText(limits.name_bytes), "--max-names-mb");
      m.size = static_cast<uint64_t>(std::max<la_int64_t>(0, archive_entry_size(e)));
      m.data_offset = static_cast<uint64_t>(archive_filter_bytes(ar, 0));
      auto [it, added] = members_.emplace(std::move(*name), std::move(m));
      if (added && it->second.type == AE_IFREG) previous = &it->second;
    }
  }

  // The regular file member `name` names, through member links; null when there is none.
  const Member* Resolve(std::string name) const {
    for (int hops = 0; hops <= kMaxMemberLinks; ++hops) {
      auto it = members_.find(name);
      if (it == members_.end()) return nullptr;
      const Member& m = it->second;
      if (m.type == AE_IFREG) return &m;
      bool is_link = m.type == 0 || m.type == AE_IFLNK;
      if (!is_link || !m.link) return nullptr;  // not a file, or a link out of the archive
      name = *m.link;
    }
    throw util::Fatal(Where(name) + ": too many links between archive members");
  }

  const Member& Find(const std::string& name) const {
    auto clean = CleanMemberName(name);
    if (!clean)
      throw util::Fatal(Describe() + ": refusing member name outside the archive: " + name);
    const Member* m = Resolve(*clean);
    if (m == nullptr) throw util::Fatal(damage_.empty() ? Where(name) + ": missing" : damage_);
    return *m;
  }

  fs::path path_;
  std::shared_ptr<const util::UniqueFd> fd_;
  uint64_t size_ = 0;
  std::map<std::string, Member> members_;
  std::string damage_;  // why indexing stopped early, if it did
  std::atomic<int> rescans_{0};
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

std::unique_ptr<FileStore> OpenTarStore(const fs::path& path, const util::Limits& limits) {
  return std::make_unique<TarStore>(path, limits);
}

}  // namespace imgcheck::image

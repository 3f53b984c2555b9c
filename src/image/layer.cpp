#include "image/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <system_error>

#include "image/stream.h"
#include "util/file.h"
#include "util/path.h"
#include "util/profile.h"

namespace imgcheck::image {

namespace {

namespace fs = std::filesystem;

constexpr size_t kReadBuffer = 1 << 20;
constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kOpaqueName = ".wh..wh..opq";
constexpr size_t kMaxDirDiagnostics = 100;  // dir: on a damaged tree: not 100,000 lines

// The kind of an entry of file type `type` (S_IFMT bits; libarchive's AE_IF* are the same
// values); nullopt for a socket or anything else no layer can hold.
std::optional<EntryKind> KindOfType(unsigned type) {
  static_assert(AE_IFREG == S_IFREG && AE_IFDIR == S_IFDIR && AE_IFLNK == S_IFLNK &&
                AE_IFCHR == S_IFCHR && AE_IFBLK == S_IFBLK && AE_IFIFO == S_IFIFO);
  switch (type) {
    case S_IFREG:
      return EntryKind::kFile;
    case S_IFDIR:
      return EntryKind::kDirectory;
    case S_IFLNK:
      return EntryKind::kSymlink;
    case S_IFCHR:
      return EntryKind::kCharDevice;
    case S_IFBLK:
      return EntryKind::kBlockDevice;
    case S_IFIFO:
      return EntryKind::kFifo;
    default:
      return std::nullopt;
  }
}

// libarchive is C: an exception must not cross it. The callback parks it here instead.
// The normalised absolute path of a tar name. Names that are absolute or climb above the root
// are clamped inside it, as container runtimes do, and recorded.
std::string EntryPath(std::string_view raw, int layer, std::vector<util::Diagnostic>& diags) {
  std::string path = util::NormalizePath(raw);
  int depth = 0;
  bool escapes = false;
  for (const std::string& part : util::Split(raw, '/')) {
    if (part == "..") {
      if (depth == 0)
        escapes = true;
      else
        --depth;
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
  }
  if (escapes)
    diags.push_back(
        {path, layer,
         "tar entry '" + std::string(raw) + "' climbs above the root; read as " + path});
  else if (!raw.empty() && raw.front() == '/')
    diags.push_back(
        {path, layer, "tar entry '" + std::string(raw) + "' is absolute; read as " + path});
  return path;
}

// Reads the current entry's data into `capturer`, sparse holes as zeros.
void CaptureData(struct archive* a, Capturer& capturer, ArchiveInput& st) {
  const void* block;
  size_t len;
  la_int64_t offset;
  uint64_t fed = 0;
  while (true) {
    int rc = archive_read_data_block(a, &block, &len, &offset);
    if (rc == ARCHIVE_EOF) return;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {  // RETRY too: a damaged header
      if (st.error) std::rethrow_exception(st.error);
      throw util::Fatal(std::string("corrupt tar: ") + archive_error_string(a));
    }
    uint64_t at = static_cast<uint64_t>(offset);
    util::ProfileSpan span(util::Stage::kCapture);
    if (at > fed && !capturer.Skip(at - fed)) return;
    if (!capturer.Feed(std::string_view(static_cast<const char*>(block), len))) return;
    fed = at + len;
  }
}

// What `c` kept, charged to the image's budget.
std::shared_ptr<const util::SparseFile> Finish(Capturer& c, uint64_t size, ImageBudget& budget) {
  auto kept = std::make_shared<const util::SparseFile>(c.Finish(size));
  budget.ChargeCaptured(kept->captured_bytes());
  return kept;
}

// Turns whiteout names into whiteout entries. False when the entry is to be dropped.
bool ClassifyWhiteout(LayerEntry& e, int layer, std::vector<util::Diagnostic>& diags) {
  std::string_view base = util::BaseName(e.path);
  if (!base.starts_with(kWhiteoutPrefix)) return true;
  std::string dir(util::DirName(e.path));
  if (base == kOpaqueName) {
    e.kind = EntryKind::kOpaque;
    e.path = dir;
    return true;
  }
  // Other ".wh..wh." names are aufs bookkeeping (.wh..wh.plnk), skipped as containerd does.
  if (base.starts_with(".wh..wh.")) return false;
  std::string_view name = base.substr(kWhiteoutPrefix.size());
  if (name.empty() || name == "." || name == "..") {
    diags.push_back({e.path, layer, "whiteout names no file; ignored"});
    return false;
  }
  e.kind = EntryKind::kWhiteout;
  e.path = util::JoinPath(dir, name);
  return true;
}

// Feeds `c` the first `size` bytes of the file `fd`, its holes (SEEK_HOLE) passed to Skip: a
// petabyte sparse file costs only its data. Returns the read error, if any.
std::string FeedSparse(int fd, uint64_t size, Capturer& c, char* buf) {
  uint64_t pos = 0;
  while (pos < size) {
    off_t data = lseek(fd, static_cast<off_t>(pos), SEEK_DATA);
    // ENXIO: only a hole is left; other errors: no hole information, read everything.
    uint64_t data_at = data >= 0 ? static_cast<uint64_t>(data) : errno == ENXIO ? size : pos;
    if (data_at > pos) {
      if (!c.Skip(std::min(data_at, size) - pos)) return "";
      pos = data_at;
      continue;
    }
    off_t hole = lseek(fd, static_cast<off_t>(pos), SEEK_HOLE);
    uint64_t hole_at = hole > static_cast<off_t>(pos) ? static_cast<uint64_t>(hole) : size;
    while (pos < std::min(hole_at, size)) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(kReadBuffer, hole_at - pos));
      ssize_t n = pread(fd, buf, std::min<uint64_t>(want, size - pos), static_cast<off_t>(pos));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return std::string("read error: ") + std::strerror(errno);
      if (n == 0) return "";  // shrank while read
      if (!c.Feed(std::string_view(buf, static_cast<size_t>(n)))) return "";
      pos += static_cast<uint64_t>(n);
    }
  }
  return "";
}

}  // namespace

LayerContents ReadLayer(HashingReader& blob, int layer, const CapturePolicy& capture,
                        ImageBudget& budget, const DigestPlan& digests) {
  LayerContents out;
  Decompressor plain(blob, budget.limits().zstd_window);
  // An uncompressed blob is the tar itself (docker save's layers): its digest is the diff_id.
  bool stored_is_tar = plain.compression() == Compression::kNone;
  HashingReader tar_stream(plain, /*hash=*/!stored_is_tar);
  ArchiveInput st;
  st.in = &tar_stream;
  auto a = NewTarReader();
  if (archive_read_open(a.get(), &st, nullptr, ArchiveInput::Read, nullptr) != ARCHIVE_OK) {
    if (st.error) std::rethrow_exception(st.error);
    // An empty stream is an empty layer; anything else is not a tar.
    if (tar_stream.count() != 0)
      throw util::Fatal(std::string("not a tar stream: ") + archive_error_string(a.get()));
  } else {
    std::string last = "(start)";
    struct archive_entry* ae;
    while (true) {
      int rc = archive_read_next_header(a.get(), &ae);
      if (rc == ARCHIVE_EOF) break;
      if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {  // RETRY too: a damaged header
        if (st.error) std::rethrow_exception(st.error);
        throw util::Fatal(std::string("corrupt tar after entry '") + last +
                          "': " + archive_error_string(a.get()));
      }
      const char* name = archive_entry_pathname(ae);
      if (name == nullptr) name = archive_entry_pathname_utf8(ae);
      if (name == nullptr) {
        budget.ChargeEntry(last.size());  // the diagnostic holds it
        out.diagnostics.push_back(
            {"", layer, "tar entry after '" + last + "' has an unreadable name; skipped"});
        continue;
      }
      last = name;
      const char* link = archive_entry_hardlink(ae);
      if (link == nullptr) link = archive_entry_symlink(ae);
      budget.ChargeEntry(std::strlen(name) + (link ? std::strlen(link) : 0));
      LayerEntry e;
      e.path = EntryPath(name, layer, out.diagnostics);
      e.mode = archive_entry_perm(ae);
      const char* hardlink = archive_entry_hardlink(ae);
      if (hardlink != nullptr) {
        e.kind = EntryKind::kHardlink;
        e.link_target = EntryPath(hardlink, layer, out.diagnostics);
      } else {
        std::optional<EntryKind> kind = KindOfType(archive_entry_filetype(ae));
        if (!kind) {
          out.diagnostics.push_back(
              {e.path, layer, "tar entry of unsupported type (socket?); skipped"});
          continue;
        }
        e.kind = *kind;
        if (e.kind == EntryKind::kSymlink) {
          if (const char* t = archive_entry_symlink(ae); t != nullptr)
            e.link_target = t;
          else if (const char* u = archive_entry_symlink_utf8(ae); u != nullptr)
            e.link_target = u;
        }
      }
      if (!ClassifyWhiteout(e, layer, out.diagnostics)) continue;
      if (e.kind == EntryKind::kFile) {
        e.size = static_cast<uint64_t>(std::max<la_int64_t>(0, archive_entry_size(ae)));
        e.digest_wanted = digests.Wants(e.path);
        if (capture) {
          if (std::unique_ptr<Capturer> c = capture(e.path, e.size, e.mode)) {
            if (e.digest_wanted) c = CaptureWithMd5(std::move(c));
            CaptureData(a.get(), *c, st);
            e.content = Finish(*c, e.size, budget);
          }
        }
      }
      out.entries.push_back(std::move(e));
    }
  }
  out.diff_id = tar_stream.Finish();  // the tar's end padding counts too
  if (stored_is_tar) out.diff_id = blob.Finish();
  out.size = tar_stream.count();
  return out;
}

LayerContents ReadDirectory(const fs::path& root, const CapturePolicy& capture,
                            ImageBudget& budget) {
  LayerContents out;
  struct stat root_st {};
  if (stat(root.c_str(), &root_st) != 0 || !S_ISDIR(root_st.st_mode))
    throw util::Fatal("dir:" + root.string() + ": not a directory");
  out.entries.push_back(
      {"/", EntryKind::kDirectory, static_cast<uint32_t>(root_st.st_mode) & 07777, 0, "", nullptr});
  size_t unlisted = 0;  // diagnostics past kMaxDirDiagnostics, counted in one line
  auto note = [&](std::string path, std::string message) {
    if (out.diagnostics.size() < kMaxDirDiagnostics)
      out.diagnostics.push_back({std::move(path), 0, std::move(message)});
    else
      ++unlisted;
  };
  // Lexical: fs::relative would resolve symlinks, on the host.
  auto in_image = [&](const fs::path& host) {
    return util::NormalizePath(host.lexically_relative(root).generic_string());
  };
  auto buf = std::make_unique<char[]>(kReadBuffer);
  // Depth first, each directory in name order (the listing order of a file system is not
  // stable); a failure costs the directory it happens in, never the rest of the walk.
  std::vector<fs::path> pending{root};
  while (!pending.empty()) {
    fs::path dir = std::move(pending.back());
    pending.pop_back();
    std::vector<fs::path> children;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      children.push_back(it->path());
    if (ec)
      note(in_image(dir), "cannot list directory: " + ec.message() + "; " +
                              (children.empty() ? "its contents" : "the rest of it") + " not read");
    std::sort(children.begin(), children.end());
    size_t first_subdir = pending.size();
    for (const fs::path& host : children) {
      LayerEntry e;
      e.path = in_image(host);
      struct stat st {};
      if (lstat(host.c_str(), &st) != 0) {
        note(e.path, std::string("cannot stat: ") + std::strerror(errno) + "; skipped");
        continue;
      }
      e.mode = static_cast<uint32_t>(st.st_mode) & 07777;
      std::optional<EntryKind> kind = KindOfType(st.st_mode & S_IFMT);
      if (!kind) {
        note(e.path, "unsupported file type (socket?); skipped");
        continue;
      }
      e.kind = *kind;
      if (e.kind == EntryKind::kDirectory) {
        // One file system, the one `root` is on: /proc, /sys, /dev, /run and volumes are
        // mounts of others (and /proc alone is endless); recorded as empty directories.
        if (st.st_dev != root_st.st_dev)
          note(e.path, "mount point of another file system; its contents not read");
        else
          pending.push_back(host);
      } else if (e.kind == EntryKind::kSymlink) {
        e.link_target = fs::read_symlink(host, ec).string();
        if (ec) {
          note(e.path, "cannot read symlink: " + ec.message() + "; skipped");
          continue;
        }
      }
      if (e.kind == EntryKind::kFile) {
        e.size = static_cast<uint64_t>(st.st_size);
        out.size += e.size;
        std::unique_ptr<Capturer> c = capture ? capture(e.path, e.size, e.mode) : nullptr;
        if (c) {
          // Beneath `root`, through no link, a regular file only: the path was one a moment
          // ago, but the tree may be changing under us.
          util::Expected<util::RegularFile> f =
              util::OpenRegularBeneath(root, host.lexically_relative(root).string());
          if (!f) {
            note(e.path, "cannot read: " + f.error().message);
          } else {
            if (std::string error = FeedSparse(f->fd.get(), e.size, *c, buf.get()); !error.empty())
              note(e.path, error);
            e.content = Finish(*c, e.size, budget);
          }
        }
      }
      budget.ChargeEntry(e.path.size() + e.link_target.size());
      out.entries.push_back(std::move(e));
    }
    // The stack pops the last pushed first: reverse, so that subdirectories go in name order.
    std::reverse(pending.begin() + static_cast<std::ptrdiff_t>(first_subdir), pending.end());
  }
  if (unlisted > 0)
    out.diagnostics.push_back(
        {"", 0, std::to_string(unlisted) + " more unreadable or skipped entries not listed"});
  return out;
}

}  // namespace imgcheck::image

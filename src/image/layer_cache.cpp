#include "image/layer_cache.h"

#include <fcntl.h>
#include <isa-l/crc64.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <system_error>
#include <vector>

#include "util/file.h"
#include "util/reader.h"
#include "util/sha256.h"

namespace imgcheck::image {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMagic = "imgcLYR\n";
constexpr size_t kDigestHex = 64;    // an entry's name, a key's SHA-256
constexpr size_t kChecksumHex = 16;  // the payload's CRC-64
constexpr size_t kHeaderSize = kMagic.size() + 4 + 4 + 8 + kChecksumHex;
constexpr std::string_view kTempPrefix = ".tmp-";
constexpr int64_t kAbandonedTempSeconds = 3600;
// The least bytes an entry or a diagnostic takes in the payload: bounds a count before reserve().
constexpr size_t kMinEntryBytes = 1 + 4 + 8 + 4 + 4 + 1;
constexpr size_t kMinDiagnosticBytes = 4 + 1 + 4;
constexpr uint8_t kHasContent = 1, kDigestWanted = 2;  // an entry's flags byte

// The payload's checksum: CRC-64/ECMA-182 (ISA-L's, several GB/s), in lower-case hex.
std::string Checksum(std::string_view payload) {
  uint64_t crc =
      crc64_ecma_refl(0, reinterpret_cast<const unsigned char*>(payload.data()), payload.size());
  char hex[kChecksumHex + 1];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, crc);
  return std::string(hex, kChecksumHex);
}

// Whether `c` is the reading of exactly the blob and tar `key` names.
bool Matches(const LayerKey& key, const LayerContents& c) {
  return (key.digest.empty() || c.digest == key.digest) && c.diff_id == key.diff_id;
}

class Writer {
 public:
  template <class T>
  void Put(T v) {
    static_assert(std::is_integral_v<T>);
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // the encoding is little-endian, as every host imgcheck targets
    out_.append(b, sizeof(T));
  }
  void PutString(std::string_view s) {
    Put(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void PutBlob(std::string_view s) {
    Put(static_cast<uint64_t>(s.size()));
    out_.append(s);
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the cache encoding assumes a little-endian host");

// Reads a u32-length string into `out`; false past the end.
bool GetString(util::Reader& r, std::string& out) {
  std::optional<uint32_t> n = r.Read<uint32_t>();
  if (!n) return false;
  std::optional<std::string_view> s = r.Bytes(*n);
  if (!s) return false;
  out.assign(*s);
  return true;
}

// Empty (none computed) or 32 lower-case hex digits.
bool IsHex(std::string_view s, size_t n) {
  return s.empty() || (s.size() == n && util::IsLowerHex(s));
}

bool ParsePayload(util::Reader& r, int layer, LayerContents& c) {
  if (!GetString(r, c.digest) || !GetString(r, c.diff_id)) return false;
  std::optional<uint64_t> csize = r.Read<uint64_t>(), size = r.Read<uint64_t>();
  std::optional<uint32_t> ndiag = r.Read<uint32_t>();
  if (!csize || !size || !ndiag || *ndiag > r.remaining() / kMinDiagnosticBytes) return false;
  c.compressed_size = *csize;
  c.size = *size;
  c.diagnostics.resize(*ndiag);
  for (util::Diagnostic& d : c.diagnostics) {
    if (!GetString(r, d.path)) return false;
    std::optional<uint8_t> same = r.Read<uint8_t>();
    if (!same || *same > 1) return false;
    if (*same == 1) {
      d.layer = layer;
    } else {
      std::optional<int32_t> l = r.Read<int32_t>();
      if (!l) return false;
      d.layer = *l;
    }
    if (!GetString(r, d.message)) return false;
  }
  std::optional<uint32_t> nentries = r.Read<uint32_t>();
  if (!nentries || *nentries > r.remaining() / kMinEntryBytes) return false;
  c.entries.resize(*nentries);
  for (LayerEntry& e : c.entries) {
    std::optional<uint8_t> kind = r.Read<uint8_t>();
    std::optional<uint32_t> mode = r.Read<uint32_t>();
    std::optional<uint64_t> esize = r.Read<uint64_t>();
    if (!kind || !mode || !esize || *kind > static_cast<uint8_t>(EntryKind::kOpaque)) return false;
    e.kind = static_cast<EntryKind>(*kind);
    e.mode = *mode;
    e.size = *esize;
    if (!GetString(r, e.path) || !GetString(r, e.link_target)) return false;
    std::optional<uint8_t> flags = r.Read<uint8_t>();
    if (!flags || (*flags & ~(kHasContent | kDigestWanted)) != 0) return false;
    e.digest_wanted = (*flags & kDigestWanted) != 0;
    if ((*flags & kHasContent) == 0) continue;
    std::optional<uint64_t> file_size = r.Read<uint64_t>();
    std::optional<uint32_t> nextents = r.Read<uint32_t>();
    if (!file_size || !nextents) return false;
    auto content = std::make_shared<util::SparseFile>(*file_size);
    uint64_t end_of_last = 0;
    for (uint32_t i = 0; i < *nextents; ++i) {
      std::optional<uint64_t> offset = r.Read<uint64_t>(), len = r.Read<uint64_t>();
      if (!offset || !len) return false;
      std::optional<std::string_view> bytes = r.Bytes(*len);
      std::optional<uint64_t> end = util::CheckedAdd(*offset, *len);
      // Extents as SparseFile keeps them: sorted, disjoint, inside the file.
      if (!bytes || !end || *end > *file_size || (i > 0 && *offset <= end_of_last)) return false;
      content->Add(*offset, *bytes);
      end_of_last = *end;
    }
    std::string md5;
    std::string sha256;
    if (!GetString(r, md5) || !IsHex(md5, 32) || !GetString(r, sha256) || !IsHex(sha256, 64))
      return false;
    std::optional<uint64_t> annex_size = r.Read<uint64_t>();
    std::optional<std::string_view> annex = annex_size ? r.Bytes(*annex_size) : std::nullopt;
    if (!annex) return false;
    content->set_md5(std::move(md5));
    content->set_sha256(std::move(sha256));
    content->set_annex(std::string(*annex));
    e.content = std::move(content);
  }
  return r.remaining() == 0;
}

// The whole of a regular file, at most `limit` bytes; nullopt on any error or when larger.
std::optional<std::string> ReadSmallFile(int fd, uint64_t limit) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > limit)
    return std::nullopt;
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<size_t>(n);
  }
  return data;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool IsEntryName(std::string_view name) {
  return name.size() == kDigestHex && util::IsLowerHex(name);
}

}  // namespace

fs::path DefaultCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return fs::path(xdg) / "imgcheck";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return fs::path(home) / ".cache" / "imgcheck";
  return {};
}

std::string LayerKey::Hex() const {
  util::Sha256 sha;
  // NUL-separated: no field can contain a NUL, so two different keys never hash the same text.
  std::string text = "imgcheck layer cache " + std::to_string(kLayerCacheVersion);
  for (const std::string* field : {&digest, &diff_id, &capture_id}) {
    text += '\0';
    text += *field;
  }
  sha.Update(text);
  return sha.HexDigest();
}

std::string SerializeLayer(const LayerContents& c, int layer) {
  Writer w;
  w.PutString(c.digest);
  w.PutString(c.diff_id);
  w.Put<uint64_t>(c.compressed_size);
  w.Put<uint64_t>(c.size);
  w.Put(static_cast<uint32_t>(c.diagnostics.size()));
  for (const util::Diagnostic& d : c.diagnostics) {
    w.PutString(d.path);
    w.Put<uint8_t>(d.layer == layer ? 1 : 0);
    if (d.layer != layer) w.Put<int32_t>(d.layer);
    w.PutString(d.message);
  }
  w.Put(static_cast<uint32_t>(c.entries.size()));
  for (const LayerEntry& e : c.entries) {
    w.Put(static_cast<uint8_t>(e.kind));
    w.Put<uint32_t>(e.mode);
    w.Put<uint64_t>(e.size);
    w.PutString(e.path);
    w.PutString(e.link_target);
    w.Put<uint8_t>((e.content ? kHasContent : 0) | (e.digest_wanted ? kDigestWanted : 0));
    if (!e.content) continue;
    w.Put<uint64_t>(e.content->size());
    w.Put(static_cast<uint32_t>(e.content->extents().size()));
    for (const util::SparseFile::Extent& x : e.content->extents()) {
      w.Put<uint64_t>(x.offset);
      w.PutBlob(x.bytes);
    }
    w.PutString(e.content->md5());
    w.PutString(e.content->sha256());
    w.PutBlob(e.content->annex());
  }
  std::string checksum = Checksum(w.str());

  Writer h;
  h.str().reserve(kHeaderSize + w.str().size());
  h.str().append(kMagic);
  h.Put<uint32_t>(kLayerCacheVersion);
  h.Put<uint32_t>(0);  // flags, none yet
  h.Put<uint64_t>(w.str().size());
  h.str().append(checksum);
  h.str().append(w.str());
  return std::move(h.str());
}

std::optional<LayerContents> ParseLayer(std::string_view bytes, int layer) {
  util::Reader r(bytes);
  std::optional<std::string_view> magic = r.Bytes(kMagic.size());
  std::optional<uint32_t> version = r.Read<uint32_t>(), flags = r.Read<uint32_t>();
  std::optional<uint64_t> length = r.Read<uint64_t>();
  std::optional<std::string_view> checksum = r.Bytes(kChecksumHex);
  if (!magic || *magic != kMagic || !version || *version != kLayerCacheVersion || !flags ||
      *flags != 0 || !length || !checksum || *length != r.remaining())
    return std::nullopt;
  std::string_view payload = bytes.substr(r.offset());
  if (Checksum(payload) != *checksum) return std::nullopt;
  util::Reader p(payload);
  LayerContents c;
  if (!ParsePayload(p, layer, c)) return std::nullopt;
  return c;
}

LayerCache::LayerCache(const fs::path& dir, uint64_t max_bytes,
                       std::shared_ptr<SharedLayers> shared)
    : dir_(dir / "layers"), max_bytes_(max_bytes), shared_(std::move(shared)) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return;
  // Private: entries describe the images this user scanned.
  fs::permissions(dir, fs::perms::owner_all, ec);
  fs::permissions(dir_, fs::perms::owner_all, ec);
  enabled_ = fs::is_directory(dir_, ec);
}

std::optional<LayerContents> LayerCache::Lookup(const LayerKey& key, int layer) const {
  if (!enabled_) return LookupShared(key, layer);
  fs::path path = EntryPath(key);
  // A regular file in the cache directory, never a link or a FIFO planted there (util/file.h).
  int error = 0;
  util::Expected<util::RegularFile> f = util::OpenRegularBeneath(dir_, key.Hex(), &error);
  if (!f) {
    if (error != ENOENT) unlink(path.c_str());  // not an entry: rebuilt by the caller
    return LookupShared(key, layer);
  }
  int fd = f->fd.get();
  std::optional<std::string> data = ReadSmallFile(fd, max_bytes_);
  std::optional<LayerContents> c;
  if (data) c = ParseLayer(*data, layer);
  if (c && !Matches(key, *c)) c.reset();
  if (c) futimens(fd, nullptr);  // most recently used now, for Prune
  if (!c) unlink(path.c_str());  // corrupt or foreign: the caller reads the layer and stores anew
  return c ? c : LookupShared(key, layer);
}

std::optional<LayerContents> LayerCache::LookupShared(const LayerKey& key, int layer) const {
  if (!shared_) return std::nullopt;
  std::string name = "layer:" + key.Hex();
  std::optional<std::string> data = shared_->Get(name);
  if (!data) return std::nullopt;
  std::optional<LayerContents> c = ParseLayer(*data, layer);
  if (!c) {
    shared_->Discard(name, "does not parse");
    return std::nullopt;
  }
  if (!Matches(key, *c)) {
    shared_->Discard(name, "is another layer's");
    return std::nullopt;
  }
  if (enabled_ && data->size() <= max_bytes_) StoreLocal(key, *data);
  return c;
}

void LayerCache::Store(const LayerKey& key, const LayerContents& contents, int layer) const {
  if (!enabled() || !Matches(key, contents)) return;
  std::string data = SerializeLayer(contents, layer);
  if (shared_) shared_->Put("layer:" + key.Hex(), data);
  if (enabled_ && data.size() <= max_bytes_) StoreLocal(key, data);
}

void LayerCache::StoreLocal(const LayerKey& key, const std::string& data) const {
  std::string tmp = (dir_ / (std::string(kTempPrefix) + "XXXXXX")).string();
  int fd = mkstemp(tmp.data());
  if (fd < 0) return;
  bool ok = WriteAll(fd, data) && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  // rename(2) replaces atomically: a concurrent reader sees the old entry or the new one, and
  // two writers of the same key both write complete entries of the same reading.
  if (!ok || rename(tmp.c_str(), EntryPath(key).c_str()) != 0) unlink(tmp.c_str());
}

uint64_t LayerCache::Prune() const {
  if (!enabled_) return 0;
  struct Item {
    struct timespec mtime;
    uint64_t size;
    fs::path path;
  };
  std::vector<Item> items;
  uint64_t total = 0, freed = 0;
  time_t now = time(nullptr);
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (name.starts_with(kTempPrefix)) {
      if (now - st.st_mtim.tv_sec > kAbandonedTempSeconds && unlink(it->path().c_str()) == 0)
        freed += static_cast<uint64_t>(st.st_size);
      continue;
    }
    if (!IsEntryName(name)) continue;
    items.push_back({st.st_mtim, static_cast<uint64_t>(st.st_size), it->path()});
    total += static_cast<uint64_t>(st.st_size);
  }
  if (total <= max_bytes_) return freed;
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec
                                            : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  for (const Item& item : items) {
    if (total <= max_bytes_) break;
    // Another process may have pruned it already; either way it no longer counts.
    unlink(item.path.c_str());
    total -= item.size;
    freed += item.size;
  }
  return freed;
}

}  // namespace imgcheck::image

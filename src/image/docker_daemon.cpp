#include "image/docker_daemon.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "image/layer.h"
#include "image/manifest.h"
#include "image/registry_http.h"
#include "image/stream.h"
#include "util/error.h"

namespace imgcheck::image {

namespace {

constexpr uint64_t kMaxErrorBody = 1 << 16;

// The daemon's own words from an error body ({"message": "..."}), else the status.
std::string DaemonMessage(HttpExchange& x) {
  std::string body;
  x.ReadAll(body, kMaxErrorBody);
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string())
    return j["message"].get<std::string>();
  return "HTTP " + std::to_string(x.status());
}

}  // namespace

DaemonEndpoint DaemonFromEnv(const char* docker_host) {
  DaemonEndpoint d;
  d.host = docker_host && *docker_host ? docker_host : "unix:///var/run/docker.sock";
  std::string_view h = d.host;
  if (h.substr(0, 7) == "unix://") {
    d.unix_socket = std::string(h.substr(7));
    d.base_url = "http://localhost";
  } else if (h.substr(0, 6) == "tcp://") {
    d.base_url = "http://" + std::string(h.substr(6));
  } else {
    throw util::Fatal("DOCKER_HOST=" + d.host +
                      ": only unix:///PATH and tcp://HOST:PORT (no TLS) are supported");
  }
  if (d.unix_socket.empty() && d.base_url == "http://")
    throw util::Fatal("DOCKER_HOST=" + d.host + " names no address");
  return d;
}

std::string DaemonExportPath(std::string_view name) {
  std::string n(name);
  size_t slash = n.rfind('/');
  bool tagged = n.find('@') != std::string::npos ||
                n.find(':', slash == std::string::npos ? 0 : slash) != std::string::npos;
  if (!tagged) n += ":latest";
  std::string path = "/images/";
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char c : n) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || std::strchr("-._~/:@", c) != nullptr) {
      path += c;
    } else {
      path += '%';
      path += kHex[u >> 4];
      path += kHex[u & 15];
    }
  }
  return path + "/get";
}

namespace {

// The export's body, pulled (HttpExchange reads only while asked).
class ExchangeReader : public BlobReader {
 public:
  ExchangeReader(HttpExchange& x, std::string what) : x_(x), what_(std::move(what)) {}
  size_t Read(char* buf, size_t n) override {
    size_t got = x_.Read(buf, n);
    if (got == 0 && x_.error() != TransportError::kNone)
      throw util::Fatal(what_ + ": the export broke off: " + x_.error_message());
    return got;
  }

 private:
  HttpExchange& x_;
  std::string what_;
};

// The current archive member's data, after `head` (bytes already peeked).
class MemberData : public BlobReader {
 public:
  MemberData(struct archive* a, std::string head, std::string what)
      : a_(a), head_(std::move(head)), what_(std::move(what)) {}
  size_t Read(char* buf, size_t n) override {
    if (pos_ < head_.size()) {
      size_t k = std::min(n, head_.size() - pos_);
      std::memcpy(buf, head_.data() + pos_, k);
      pos_ += k;
      return k;
    }
    la_ssize_t got = archive_read_data(a_, buf, n);
    if (got < 0) throw util::Fatal(what_ + ": " + archive_error_string(a_));
    return static_cast<size_t>(got);
  }

 private:
  struct archive* a_;
  std::string head_;
  size_t pos_ = 0;
  std::string what_;
};

class StringReader : public BlobReader {
 public:
  explicit StringReader(const std::string& s) : s_(s) {}
  size_t Read(char* buf, size_t n) override {
    size_t k = std::min(n, s_.size() - pos_);
    std::memcpy(buf, s_.data() + pos_, k);
    pos_ += k;
    return k;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

// A tar member that is a layer blob: gzip, zstd, or a tar ("ustar" at offset 257).
bool LooksLikeLayer(std::string_view head) {
  return CompressionOf(head) != Compression::kNone ||
         (head.size() >= 262 && head.substr(257, 5) == "ustar");
}

// The members of the exported archive: small ones in memory, layers as read.
class DaemonStore : public FileStore {
 public:
  explicit DaemonStore(std::string describe) : describe_(std::move(describe)) {}
  bool Has(const std::string& name) override {
    std::string n = Resolve(name);
    return small_.count(n) || layers_.count(n);
  }
  std::string Read(const std::string& name, uint64_t limit) override {
    auto it = small_.find(Resolve(name));
    if (it == small_.end()) throw util::Fatal(describe_ + ":" + name + ": missing");
    if (it->second.size() > limit)
      throw util::Fatal(describe_ + ":" + name + ": larger than the limit of " +
                        std::to_string(limit) + " bytes");
    return it->second;
  }
  std::unique_ptr<BlobReader> Open(const std::string& name) override {
    auto it = small_.find(Resolve(name));
    if (it == small_.end()) throw util::Fatal(describe_ + ":" + name + ": missing");
    return std::make_unique<StringReader>(it->second);
  }
  uint64_t Size(const std::string& name) override {
    std::string n = Resolve(name);
    if (auto it = small_.find(n); it != small_.end()) return it->second.size();
    if (auto it = layers_.find(n); it != layers_.end()) return it->second.contents.compressed_size;
    throw util::Fatal(describe_ + ":" + name + ": missing");
  }
  std::string Describe() const override { return describe_; }
  const PrereadLayer* Preread(const std::string& name) override {
    auto it = layers_.find(Resolve(name));
    return it == layers_.end() ? nullptr : &it->second;
  }

  std::map<std::string, std::string> small_;
  std::map<std::string, PrereadLayer> layers_;
  std::map<std::string, std::string> links_;  ///< member -> member it links to

 private:
  // The member `name` means, normalised as the archive reader does, through the links docker
  // save writes for repeated layers; "" for a name outside the archive.
  std::string Resolve(const std::string& raw) const {
    std::string name = CleanMemberName(raw).value_or("");
    for (int hops = 0; hops < 8; ++hops) {
      auto it = links_.find(name);
      if (it == links_.end()) break;
      name = it->second;
    }
    return name;
  }
  std::string describe_;
};

}  // namespace

std::unique_ptr<FileStore> OpenDaemonStore(std::string_view name, const CapturePolicy& capture,
                                           const util::Limits& limits, const DigestPlan& digests) {
  ImageBudget budget(limits);  // the export's layers are read here, as they stream past
  DaemonEndpoint d = DaemonFromEnv(std::getenv("DOCKER_HOST"));
  std::string what = "docker-daemon:" + std::string(name);
  HttpRequest req;
  req.url = d.base_url + DaemonExportPath(name);
  HttpExchange x(req, TlsOptions{}, d.unix_socket);
  if (!x.WaitHeaders())
    throw util::Fatal(what + ": cannot reach the Docker Engine at " + d.host +
                      " (DOCKER_HOST): " + x.error_message());
  if (x.status() != 200)
    throw util::Fatal(what + ": the Docker Engine at " + d.host + " says: " + DaemonMessage(x));

  auto store = std::make_unique<DaemonStore>(what);
  ExchangeReader body(x, what);
  HashingReader chunks(body, /*hash=*/false);
  ArchiveInput st{&chunks, nullptr};
  auto a = NewTarReader();
  if (archive_read_open(a.get(), &st, nullptr, ArchiveInput::Read, nullptr) != ARCHIVE_OK) {
    if (st.error) std::rethrow_exception(st.error);
    throw util::Fatal(what + ": the export is not a tar archive: " + archive_error_string(a.get()));
  }
  while (true) {
    struct archive_entry* e;
    int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      if (st.error) std::rethrow_exception(st.error);
      throw util::Fatal(what + ": corrupt export: " + archive_error_string(a.get()));
    }
    const char* raw = archive_entry_pathname(e);
    auto member = raw ? CleanMemberName(raw) : std::nullopt;
    if (!member) continue;
    if (const char* hard = archive_entry_hardlink(e); hard != nullptr) {
      if (auto target = CleanMemberName(hard)) store->links_[*member] = *target;
      continue;
    }
    if (archive_entry_filetype(e) == AE_IFLNK) {
      const char* target = archive_entry_symlink(e);
      std::string dir =
          member->find('/') == std::string::npos ? "" : member->substr(0, member->rfind('/') + 1);
      if (target && target[0] != '/')
        if (auto t = CleanMemberName(dir + target)) store->links_[*member] = *t;
      continue;
    }
    if (archive_entry_filetype(e) != AE_IFREG) continue;
    std::string head(512, '\0');
    size_t have = 0;
    while (have < head.size()) {
      la_ssize_t got = archive_read_data(a.get(), head.data() + have, head.size() - have);
      if (got < 0) throw util::Fatal(what + ":" + *member + ": " + archive_error_string(a.get()));
      if (got == 0) break;
      have += static_cast<size_t>(got);
    }
    head.resize(have);
    MemberData data(a.get(), head, what + ":" + *member);
    if (LooksLikeLayer(head)) {
      PrereadLayer& pre = store->layers_[*member];
      HashingReader stored(data);
      try {
        pre.contents = ReadLayer(stored, -1, capture, budget, digests);
      } catch (const util::Fatal& err) {
        pre.error = err.what();
      }
      pre.contents.digest = stored.Finish();
      pre.contents.compressed_size = stored.count();
    } else {
      // Manifests, configs, repositories, VERSION, an empty layer's zero blocks.
      // Kept up to one byte past the largest limit, so Read() reports a larger one as such.
      std::string& bytes = store->small_[*member];  // `data` starts with the peeked bytes
      char buf[1 << 16];
      size_t n;
      while ((n = data.Read(buf, sizeof buf)) > 0)
        if (bytes.size() <= kMaxConfigBytes)
          bytes.append(buf, std::min<size_t>(n, kMaxConfigBytes + 1 - bytes.size()));
    }
  }
  if (st.error) std::rethrow_exception(st.error);
  return store;
}

}  // namespace imgcheck::image

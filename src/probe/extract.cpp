// Extracting single files' full bytes from an image, through the image stage's public API: the
// image is read again with a capture policy that streams candidate files to disk, and the merged
// tree of that reading says which copy each path kept.
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>

#include "probe/stage.h"
#include "util/error.h"

namespace imgcheck::probe {
namespace {

namespace fs = std::filesystem;

// The capturer's record of a copy is its number, not its bytes: the merge hands each path the
// record of the copy it kept (a hard link shares its target's), so the winning copy is known
// exactly, whichever layer or name wrote it.
constexpr size_t kIdBytes = sizeof(uint64_t);

struct Copy {
  fs::path file;
  uint64_t size = 0;
  bool complete = false;
};

class Copies {
 public:
  Copies(fs::path dir, std::string prefix) : dir_(std::move(dir)), prefix_(std::move(prefix)) {}
  uint64_t Start(uint64_t size) {
    std::lock_guard lock(mu_);
    copies_.push_back({dir_ / (prefix_ + std::to_string(copies_.size())), size, false});
    return copies_.size() - 1;
  }
  Copy& At(uint64_t i) {
    std::lock_guard lock(mu_);
    return copies_[i];  // a deque: references stay valid while others are added
  }
  const std::deque<Copy>& all() const { return copies_; }

 private:
  std::mutex mu_;
  fs::path dir_;
  std::string prefix_;
  std::deque<Copy> copies_;
};

class DiskCapturer : public image::Capturer {
 public:
  DiskCapturer(Copies& copies, uint64_t id)
      : id_(id), copy_(copies.At(id)), out_(copy_.file, std::ios::binary | std::ios::trunc) {}
  bool Feed(std::string_view chunk) override {
    out_.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    written_ += chunk.size();
    return static_cast<bool>(out_);
  }
  util::SparseFile Finish(uint64_t size) override {
    out_.close();
    copy_.complete = out_.good() && written_ == size;
    char id[kIdBytes];
    std::memcpy(id, &id_, kIdBytes);
    util::SparseFile f(size);
    f.Add(0, std::string_view(id, kIdBytes));
    return f;
  }

 private:
  uint64_t id_;
  Copy& copy_;
  std::ofstream out_;
  uint64_t written_ = 0;
};

// The copy a node of the re-read tree kept, when a DiskCapturer made its content.
std::optional<uint64_t> CopyOf(const image::Node& node) {
  if (!node.content || node.content->extents().size() != 1) return std::nullopt;
  const auto& e = node.content->extents().front();
  if (e.offset != 0 || e.bytes.size() != kIdBytes) return std::nullopt;
  uint64_t id;
  std::memcpy(&id, e.bytes.data(), kIdBytes);
  return id;
}

// True when `file` holds every byte the scan kept of the file (ELF headers and tables).
bool AgreesWithScan(const fs::path& file, const image::Node& scanned) {
  if (!scanned.content) return true;
  std::ifstream in(file, std::ios::binary);
  std::string buf;
  for (const auto& e : scanned.content->extents()) {
    buf.resize(e.bytes.size());
    in.seekg(static_cast<std::streamoff>(e.offset));
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (!in || buf != e.bytes) return false;
  }
  return true;
}

using Wanted = std::map<std::string, const image::Node*, std::less<>>;

struct Reading {
  std::map<std::string, fs::path> files;  ///< the wanted paths found, agreeing with the scan
  std::set<std::string> disagree;         ///< found, but with other bytes than the scan saw
};

// One reading of the image (only `layers` when not empty). Candidates are the wanted paths and,
// since a hard link's bytes come with the entry it names, any file of a wanted size. Copies no
// wanted path kept are removed; a copy two paths kept is hard-linked for the second.
Reading Read(const std::string& reference, const image::LoadOptions& options, const Wanted& wanted,
             const fs::path& dir, const std::set<int>& layers, const std::string& prefix) {
  std::set<uint64_t> sizes;
  for (const auto& [path, node] : wanted)
    if (node->size > 0) sizes.insert(node->size);
  Copies copies(dir, prefix);
  image::LoadOptions o = options;
  o.use_cache = false;  // the cache keeps readings, not bytes: every layer read must stream
  o.capture_id.clear();
  if (!layers.empty()) o.read_layer = [&layers](int layer) { return layers.count(layer) > 0; };
  o.capture = [&](std::string_view path, uint64_t size,
                  uint32_t) -> std::unique_ptr<image::Capturer> {
    if (!sizes.count(size) && !wanted.count(path)) return nullptr;
    return std::make_unique<DiskCapturer>(copies, copies.Start(size));
  };
  image::Image img = image::Load(reference, o);

  Reading r;
  std::set<uint64_t> kept;
  for (const auto& [path, scanned] : wanted) {
    const image::Node* node = img.tree.Find(path);
    if (!node || node->type != image::NodeType::kRegular || node->size != scanned->size) continue;
    std::optional<uint64_t> id = CopyOf(*node);
    if (!id || *id >= copies.all().size() || !copies.all()[*id].complete) continue;
    const Copy& c = copies.all()[*id];
    if (!AgreesWithScan(c.file, *scanned)) {
      r.disagree.insert(path);
      continue;
    }
    fs::path file = c.file;
    if (!kept.insert(*id).second) {
      file += "-" + std::to_string(r.files.size());
      std::error_code ec;
      fs::create_hard_link(c.file, file, ec);
      if (ec) fs::copy_file(c.file, file, ec);
      if (ec) throw util::Fatal("cannot write " + file.string() + ": " + ec.message());
    }
    r.files.emplace(path, file);
  }
  for (uint64_t i = 0; i < copies.all().size(); ++i) {
    std::error_code ec;
    if (!kept.count(i)) fs::remove(copies.all()[i].file, ec);
  }
  return r;
}

}  // namespace

std::map<std::string, fs::path> ExtractFiles(const std::string& reference,
                                             const image::LoadOptions& options,
                                             const image::Tree& scanned,
                                             const std::set<std::string>& paths,
                                             const fs::path& dir) {
  Wanted wanted;
  std::set<int> layers;
  for (const auto& path : paths)
    if (const image::Node* node = scanned.Find(path);
        node && node->type == image::NodeType::kRegular) {
      wanted.emplace(path, node);
      layers.insert(node->layer);
    }
  if (wanted.empty()) return {};
  // First only the layers that last wrote the paths. Their tree may place a file otherwise than
  // the full one (a lower layer made a parent directory a link, a hard link names a file of a
  // lower layer): a path missing, or with other bytes than the scan kept, sends us to read every
  // layer, whose merge is the scan's own.
  Reading first = Read(reference, options, wanted, dir, layers, ".extract-");
  if (first.files.size() == wanted.size()) return first.files;
  for (const auto& [path, file] : first.files) {
    std::error_code ec;
    fs::remove(file, ec);
  }
  Reading all = Read(reference, options, wanted, dir, {}, ".extract-all-");
  if (!all.disagree.empty())
    throw util::Fatal("cannot extract " + *all.disagree.begin() +
                      ": the image read again differs from the one scanned");
  return all.files;
}

}  // namespace imgcheck::probe

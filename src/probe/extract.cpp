// Extracting single files' full bytes from an image, through the image stage's public API: the
// image is read again with a capture policy that streams the wanted files to disk.
#include <algorithm>
#include <deque>
#include <fstream>
#include <mutex>

#include "probe/stage.h"
#include "util/error.h"

namespace imgcheck::probe {
namespace {

namespace fs = std::filesystem;

// The first bytes of a copy identify it among the copies of the same path in other layers:
// the capturer hands them to the merged tree, which keeps the winning layer's.
constexpr size_t kTagBytes = 4096;

struct Copy {
  std::string path;
  fs::path file;
  uint64_t size = 0;
  std::string tag;
  bool complete = false;
};

class Copies {
 public:
  explicit Copies(fs::path dir) : dir_(std::move(dir)) {}
  size_t Start(std::string_view path, uint64_t size) {
    std::lock_guard lock(mu_);
    copies_.push_back({std::string(path), dir_ / (".extract-" + std::to_string(copies_.size())),
                       size, "", false});
    return copies_.size() - 1;
  }
  Copy& At(size_t i) {
    std::lock_guard lock(mu_);
    return copies_[i];  // a deque: references stay valid while others are added
  }
  const std::deque<Copy>& all() const { return copies_; }

 private:
  std::mutex mu_;
  fs::path dir_;
  std::deque<Copy> copies_;
};

class DiskCapturer : public image::Capturer {
 public:
  DiskCapturer(Copies& copies, size_t index)
      : copy_(copies.At(index)), out_(copy_.file, std::ios::binary | std::ios::trunc) {}
  bool Feed(std::string_view chunk) override {
    if (copy_.tag.size() < kTagBytes)
      copy_.tag.append(chunk.substr(0, kTagBytes - copy_.tag.size()));
    out_.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    written_ += chunk.size();
    return static_cast<bool>(out_);
  }
  util::SparseFile Finish(uint64_t size) override {
    out_.close();
    copy_.complete = out_.good() && written_ == size;
    util::SparseFile f(size);
    f.Add(0, copy_.tag);
    return f;
  }

 private:
  Copy& copy_;
  std::ofstream out_;
  uint64_t written_ = 0;
};

bool SameBytes(const fs::path& a, const fs::path& b) {
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  std::string ba(1 << 16, '\0'), bb(1 << 16, '\0');
  while (fa && fb) {
    fa.read(ba.data(), static_cast<std::streamsize>(ba.size()));
    fb.read(bb.data(), static_cast<std::streamsize>(bb.size()));
    if (fa.gcount() != fb.gcount() || ba.compare(0, static_cast<size_t>(fa.gcount()), bb, 0,
                                                 static_cast<size_t>(fb.gcount())) != 0)
      return false;
  }
  return !fa && !fb;
}

}  // namespace

std::map<std::string, fs::path> ExtractFiles(const std::string& reference,
                                             const image::LoadOptions& options,
                                             const std::set<std::string>& paths,
                                             const fs::path& dir, const std::set<int>& layers) {
  Copies copies(dir);
  image::LoadOptions o = options;
  o.use_cache = false;  // the cache keeps readings, not bytes: every layer read must stream
  o.capture_id.clear();
  if (!layers.empty()) o.read_layer = [&layers](int layer) { return layers.count(layer) > 0; };
  o.capture = [&copies, &paths](std::string_view path, uint64_t size,
                                uint32_t) -> std::unique_ptr<image::Capturer> {
    if (!paths.count(std::string(path))) return nullptr;
    return std::make_unique<DiskCapturer>(copies, copies.Start(path, size));
  };
  image::Image img = image::Load(reference, o);

  std::map<std::string, fs::path> out;
  for (const auto& path : paths) {
    const image::Node* node = img.tree.Find(path);
    if (!node || node->type != image::NodeType::kRegular || !node->content) continue;
    auto tag = node->content->View(0, std::min<uint64_t>(node->size, kTagBytes));
    const Copy* winner = nullptr;
    int matches = 0;
    for (const auto& c : copies.all()) {
      if (c.path != path || c.size != node->size || !c.complete || !tag || c.tag != *tag) continue;
      // Two layers may write the same path with the same size and first bytes; then any copy
      // with identical bytes will do, and differing ones cannot be told apart.
      if (winner && !SameBytes(winner->file, c.file)) ++matches;
      if (!winner) {
        winner = &c;
        matches = 1;
      }
    }
    if (!winner) continue;
    if (matches > 1)
      throw util::Fatal("cannot tell which layer's copy of " + path + " the image keeps");
    out.emplace(path, winner->file);
  }
  return out;
}

}  // namespace imgcheck::probe

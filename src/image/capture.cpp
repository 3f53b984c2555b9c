#include "image/capture.h"

#include <algorithm>
#include <string>

namespace imgcheck::image {

bool Capturer::Skip(uint64_t n) {
  static const std::string kZeros(1 << 16, '\0');
  while (n > 0) {
    size_t k = static_cast<size_t>(std::min<uint64_t>(n, kZeros.size()));
    if (!Feed(std::string_view(kZeros).substr(0, k))) return false;
    n -= k;
  }
  return true;
}

namespace {

class PrefixCapturer : public Capturer {
 public:
  explicit PrefixCapturer(uint64_t limit) : limit_(limit) {}
  bool Feed(std::string_view chunk) override {
    uint64_t room = limit_ - kept_.size();
    kept_.append(chunk.substr(0, std::min<uint64_t>(room, chunk.size())));
    return kept_.size() < limit_;
  }
  bool Skip(uint64_t n) override {  // zeros up to the limit, then no more
    return Capturer::Skip(std::min<uint64_t>(n, limit_ - kept_.size()));
  }
  util::SparseFile Finish(uint64_t size) override {
    util::SparseFile f(size);
    f.Add(0, kept_);
    return f;
  }

 private:
  uint64_t limit_;
  std::string kept_;
};

}  // namespace

std::unique_ptr<Capturer> CapturePrefix(uint64_t limit) {
  return std::make_unique<PrefixCapturer>(limit);
}

}  // namespace imgcheck::image

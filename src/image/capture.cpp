#include "image/capture.h"

namespace imgcheck::image {

namespace {

class PrefixCapturer : public Capturer {
 public:
  explicit PrefixCapturer(uint64_t limit) : limit_(limit) {}
  bool Feed(std::string_view chunk) override {
    uint64_t room = limit_ - kept_.size();
    kept_.append(chunk.substr(0, std::min<uint64_t>(room, chunk.size())));
    return kept_.size() < limit_;
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

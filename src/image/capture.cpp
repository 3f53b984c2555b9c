#include "image/capture.h"

#include <algorithm>
#include <string>

#include "util/sha256.h"

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

// Keeps what `inner` keeps and hashes every byte with `Hash`, stored by `Set` on the result.
template <class Hash, void (util::SparseFile::*Set)(std::string)>
class DigestCapturer : public Capturer {
 public:
  explicit DigestCapturer(std::unique_ptr<Capturer> inner) : inner_(std::move(inner)) {}
  bool Feed(std::string_view chunk) override {
    hash_.Update(chunk);
    fed_ += chunk.size();
    if (inner_wants_) inner_wants_ = inner_->Feed(chunk);
    return true;  // the digest needs every byte
  }
  // A hole is not hashed (a petabyte of zeros would take forever): a sparse file gets no digest,
  // and no real library is sparse.
  bool Skip(uint64_t n) override {
    sparse_ = true;
    if (inner_wants_) inner_wants_ = inner_->Skip(n);
    return inner_wants_;
  }
  util::SparseFile Finish(uint64_t size) override {
    util::SparseFile f = inner_->Finish(size);
    if (!sparse_ && fed_ == size) (f.*Set)(hash_.HexDigest());
    return f;
  }

 private:
  std::unique_ptr<Capturer> inner_;
  bool inner_wants_ = true;
  bool sparse_ = false;
  uint64_t fed_ = 0;
  Hash hash_;
};

}  // namespace

std::unique_ptr<Capturer> CaptureWithMd5(std::unique_ptr<Capturer> inner) {
  return std::make_unique<DigestCapturer<util::Md5, &util::SparseFile::set_md5>>(std::move(inner));
}

std::unique_ptr<Capturer> CaptureWithSha256(std::unique_ptr<Capturer> inner) {
  return std::make_unique<DigestCapturer<util::Sha256, &util::SparseFile::set_sha256>>(
      std::move(inner));
}

std::unique_ptr<Capturer> CapturePrefix(uint64_t limit) {
  return std::make_unique<PrefixCapturer>(limit);
}

}  // namespace imgcheck::image

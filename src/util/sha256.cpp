#include "util/sha256.h"

#include <openssl/evp.h>

#include <algorithm>

#include "util/error.h"

namespace imgcheck::util {

struct EvpDigest::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

EvpDigest::EvpDigest(Algorithm algorithm) : impl_(std::make_unique<Impl>()) {
  bool sha = algorithm == Algorithm::kSha256;
  impl_->ctx = EVP_MD_CTX_new();
  if (impl_->ctx == nullptr ||
      EVP_DigestInit_ex(impl_->ctx, sha ? EVP_sha256() : EVP_md5(), nullptr) != 1) {
    EVP_MD_CTX_free(impl_->ctx);
    throw Fatal(std::string("openssl: cannot initialise ") + (sha ? "SHA-256" : "MD5"));
  }
}

EvpDigest::~EvpDigest() { EVP_MD_CTX_free(impl_->ctx); }

void EvpDigest::Update(std::string_view bytes) {
  EVP_DigestUpdate(impl_->ctx, bytes.data(), bytes.size());
}

std::string EvpDigest::HexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(static_cast<size_t>(len) * 2);
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

AsyncSha256::AsyncSha256() : thread_([this] { Run(); }) {}

AsyncSha256::~AsyncSha256() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  work_.notify_one();
  thread_.join();
}

void AsyncSha256::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::string_view span = queue_.front();
    queue_.pop_front();
    lock.unlock();
    sha_.Update(span);
    lock.lock();
    ++hashed_;
    done_.notify_all();
  }
}

uint64_t AsyncSha256::Add(std::string_view bytes) {
  uint64_t ticket;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(bytes);
    ticket = ++added_;
  }
  work_.notify_one();
  return ticket;
}

void AsyncSha256::Wait(uint64_t ticket) {
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return hashed_ >= ticket; });
}

std::string AsyncSha256::HexDigest() {
  uint64_t last;
  {
    std::lock_guard lock(mu_);
    last = added_;
  }
  Wait(last);
  return sha_.HexDigest();
}

std::string Sha256Digest(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return "sha256:" + h.HexDigest();
}

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool IsSha256Digest(std::string_view digest) {
  return digest.size() == 71 && digest.starts_with("sha256:") && IsLowerHex(digest.substr(7));
}

std::string Md5Hex(std::string_view bytes) {
  Md5 h;
  h.Update(bytes);
  return h.HexDigest();
}

}  // namespace imgcheck::util

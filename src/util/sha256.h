// SHA-256 through OpenSSL EVP, incremental, for blob and diff_id verification; MD5 for dpkg's
// md5sums.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace imgcheck::util {

/// An incremental OpenSSL EVP digest (the classes below pick the algorithm).
class EvpDigest {
 public:
  ~EvpDigest();
  EvpDigest(const EvpDigest&) = delete;
  EvpDigest& operator=(const EvpDigest&) = delete;
  void Update(std::string_view bytes);
  /// Lower-case hex digest; the hasher cannot be updated afterwards.
  std::string HexDigest();

 protected:
  enum class Algorithm : uint8_t { kSha256, kMd5 };
  explicit EvpDigest(Algorithm algorithm);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Sha256 : public EvpDigest {
 public:
  Sha256() : EvpDigest(Algorithm::kSha256) {}
};

/// MD5: only to compare files with dpkg's info/*.md5sums (never for integrity).
class Md5 : public EvpDigest {
 public:
  Md5() : EvpDigest(Algorithm::kMd5) {}
};

/// SHA-256 on a thread of its own, so that hashing a stream overlaps with the work of the thread
/// that reads it (inflating, parsing). Add() only queues the span: its bytes must stay unchanged
/// until Wait() on the ticket Add() returned. Spans are hashed in the order they were added.
class AsyncSha256 {
 public:
  AsyncSha256();
  /// Abandons what is still queued (the caller is unwinding) and joins the thread.
  ~AsyncSha256();
  AsyncSha256(const AsyncSha256&) = delete;
  AsyncSha256& operator=(const AsyncSha256&) = delete;
  uint64_t Add(std::string_view bytes);
  /// Returns once the span of `ticket` (and every one before it) has been hashed.
  void Wait(uint64_t ticket);
  /// Lower-case hex digest of everything added; waits for it.
  std::string HexDigest();

 private:
  void Run();

  Sha256 sha_;
  std::mutex mu_;
  std::condition_variable work_, done_;
  std::deque<std::string_view> queue_;
  uint64_t added_ = 0, hashed_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once everything above exists
};

/// "sha256:<hex>" of `bytes`.
std::string Sha256Digest(std::string_view bytes);
/// True when `s` is nothing but lower-case hex digits (as every digest here is written).
bool IsLowerHex(std::string_view s);
/// True when `digest` is "sha256:" and 64 lower-case hex digits: the only digest imgcheck
/// verifies, and safe to put into a path or a URL.
bool IsSha256Digest(std::string_view digest);
/// Lower-case hex MD5 of `bytes`.
std::string Md5Hex(std::string_view bytes);

}  // namespace imgcheck::util

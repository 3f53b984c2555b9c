// SHA-256 through OpenSSL EVP, incremental, for blob and diff_id verification.
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

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view bytes);
  /// Lower-case hex digest; the hasher cannot be updated afterwards.
  std::string HexDigest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
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

}  // namespace imgcheck::util

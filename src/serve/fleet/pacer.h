// Requests to a registry spaced by a rate (issue 33: a crawl and a re-judging sweep are
// rate-limited per registry): a token bucket of one token per key, so no burst exceeds it.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>

namespace imgcheck::serve::fleet {

class Pacer {
 public:
  using Clock = std::chrono::steady_clock;
  /// `rate`: events a second per key (at least one every 1,000 s).
  explicit Pacer(double rate)
      : gap_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(1.0 / std::max(rate, 0.001)))) {}

  /// When `key`'s next event may happen; that slot is then taken. Thread-safe; the caller
  /// waits (as it can be interrupted).
  Clock::time_point Reserve(const std::string& key) {
    std::lock_guard lock(mu_);
    Clock::time_point& next = next_[key];
    next = std::max(next, Clock::now());
    Clock::time_point slot = next;
    next += gap_;
    return slot;
  }

 private:
  Clock::duration gap_;
  std::mutex mu_;
  std::map<std::string, Clock::time_point> next_;  ///< a few registries: never pruned
};

}  // namespace imgcheck::serve::fleet

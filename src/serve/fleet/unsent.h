// What a replica judged while Redis did not answer (verdicts, the digests it knows), kept to be
// written once Redis answers again, so that the fleet does not forget it: bounded like the work
// kept in memory meanwhile, the oldest dropped first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <utility>

namespace imgcheck::serve::fleet {

template <typename T>
class Unsent {
 public:
  explicit Unsent(size_t limit) : limit_(std::max<size_t>(1, limit)) {}
  /// Keeps `v`, the newest; returns how many older ones were dropped for it (0 or 1).
  size_t Push(T v) {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(v));
    return Trim();
  }
  struct Flushed {
    size_t written = 0, dropped = 0;
    std::string error;  ///< why writing stopped (the store failed); empty when all were written
  };
  /// Writes what is kept, oldest first, with `write`, which throws when the store fails: what is
  /// not written then is kept, before what was kept meanwhile (the oldest dropped to the bound).
  template <typename Write>
  Flushed Flush(Write write) {
    std::deque<T> taken;
    {
      std::lock_guard lock(mu_);
      taken.swap(items_);
    }
    Flushed out;
    try {
      for (; out.written < taken.size(); ++out.written) write(taken[out.written]);
      return out;
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    taken.erase(taken.begin(), taken.begin() + static_cast<std::ptrdiff_t>(out.written));
    std::lock_guard lock(mu_);
    for (T& v : items_) taken.push_back(std::move(v));
    items_ = std::move(taken);
    out.dropped = Trim();
    return out;
  }
  bool Empty() const {
    std::lock_guard lock(mu_);
    return items_.empty();
  }

 private:
  size_t Trim() {
    size_t dropped = 0;
    for (; items_.size() > limit_; ++dropped) items_.pop_front();
    return dropped;
  }
  size_t limit_;
  mutable std::mutex mu_;
  std::deque<T> items_;
};

}  // namespace imgcheck::serve::fleet

// A progress line for long scans: which layers are being read, bytes, rate. One line rewritten
// in place with '\r' and cleared at the end, so that nothing of it is left in the terminal.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

namespace imgcheck::image {

class Progress {
 public:
  /// True when a progress line should be drawn on `fd`: `wanted` (no --quiet) and a terminal.
  static bool ShouldShow(bool wanted, int fd = 2);

  /// A display on `fd` when `enabled`, silent otherwise. `layers` and `total_bytes` (stored
  /// bytes of all layers, 0 when unknown) are the denominators shown.
  Progress(bool enabled, int fd, int layers, uint64_t total_bytes);
  /// Clears the line.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // All thread-safe; redraws at most ten times a second.
  void StartLayer(int index);
  /// `bytes` more stored bytes of a layer were read.
  void Advance(uint64_t bytes);
  /// A layer is finished; `skipped_bytes` are those of its blob that were not read (a cache
  /// hit), so that the byte count still ends at the total.
  void FinishLayer(int index, uint64_t skipped_bytes = 0);
  /// Erases the line (also done by the destructor).
  void Clear();

  /// The line as it would be drawn now (without '\r'), for tests.
  std::string Line();

 private:
  void MaybeDraw(bool force);
  std::string LineLocked(std::chrono::steady_clock::time_point now) const;

  const bool enabled_;
  const int fd_;
  const int layers_;
  const uint64_t total_bytes_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> bytes_{0};    // stored bytes read
  std::atomic<uint64_t> skipped_{0};  // stored bytes not read (cached layers)
  std::mutex mu_;                     // guards the rest and the terminal
  std::set<int> active_;
  int done_ = 0;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace imgcheck::image

#include "image/progress.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "util/text.h"

namespace imgcheck::image {

namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
constexpr std::string_view kClearLine = "\r\x1b[K";

void WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a broken terminal is no reason to stop the scan
    s.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

bool Progress::ShouldShow(bool wanted, int fd) { return wanted && isatty(fd) == 1; }

Progress::Progress(bool enabled, int fd, int layers, uint64_t total_bytes)
    : enabled_(enabled),
      fd_(fd),
      layers_(layers),
      total_bytes_(total_bytes),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { Clear(); }

void Progress::StartLayer(int index) {
  if (!enabled_) return;
  {
    std::lock_guard lock(mu_);
    active_.insert(index);
  }
  MaybeDraw(true);
}

void Progress::Advance(uint64_t bytes) {
  if (!enabled_) return;
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  MaybeDraw(false);
}

void Progress::FinishLayer(int index, uint64_t skipped_bytes) {
  if (!enabled_) return;
  skipped_.fetch_add(skipped_bytes, std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    active_.erase(index);
    ++done_;
  }
  MaybeDraw(false);
}

void Progress::Clear() {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  if (drawn_) WriteAll(fd_, kClearLine);
  drawn_ = false;
}

std::string Progress::Line() {
  std::lock_guard lock(mu_);
  return LineLocked(std::chrono::steady_clock::now());
}

void Progress::MaybeDraw(bool force) {
  auto now = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is drawing; its line is as good
  if (!force && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  std::string line = std::string(kClearLine) + LineLocked(now);
  WriteAll(fd_, line);
  drawn_ = true;
}

std::string Progress::LineLocked(std::chrono::steady_clock::time_point now) const {
  std::string line =
      "imgcheck: layers " + std::to_string(done_) + "/" + std::to_string(layers_) + " done";
  if (!active_.empty()) {
    line += ", reading";
    for (int i : active_) line += " " + std::to_string(i);
  }
  uint64_t read = bytes_.load(std::memory_order_relaxed);
  uint64_t shown = read + skipped_.load(std::memory_order_relaxed);
  line += " | " + util::HumanBytes(static_cast<double>(shown));
  if (total_bytes_ > 0) line += " / " + util::HumanBytes(static_cast<double>(total_bytes_));
  double seconds = std::chrono::duration<double>(now - start_).count();
  if (seconds > 0.2) line += " | " + util::HumanBytes(static_cast<double>(read) / seconds) + "/s";
  return line;
}

}  // namespace imgcheck::image

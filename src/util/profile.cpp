#include "util/profile.h"

#include <sys/resource.h>

#include <array>
#include <atomic>
#include <cstdio>

namespace imgcheck::util {

namespace {

// "of which" stages are indented; inflating includes reading the blob it inflates.
constexpr const char* kNames[] = {"read layers", "  blob read", "  inflate+blob", "  hash wait",
                                  "  capture",   "layer cache", "merge",          "catalog",
                                  "loader",      "rules",       "  binding",      "report"};
static_assert(std::size(kNames) == static_cast<size_t>(Stage::kCount));

std::atomic<bool> enabled{false};
std::array<std::atomic<uint64_t>, static_cast<size_t>(Stage::kCount)> totals{};
std::chrono::steady_clock::time_point started;

double Seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

}  // namespace

void EnableProfile() {
  started = std::chrono::steady_clock::now();
  enabled.store(true, std::memory_order_relaxed);
}

bool ProfileEnabled() { return enabled.load(std::memory_order_relaxed); }

void AddProfile(Stage stage, uint64_t ns) {
  totals[static_cast<size_t>(stage)].fetch_add(ns, std::memory_order_relaxed);
}

std::string ProfileText() {
  if (!ProfileEnabled()) return "";
  std::string out = "profile (seconds; reading stages add up the time of every thread):\n";
  char line[96];
  for (size_t i = 0; i < totals.size(); ++i) {
    uint64_t ns = totals[i].load(std::memory_order_relaxed);
    std::snprintf(line, sizeof line, "  %-16s %8.3f\n", kNames[i], static_cast<double>(ns) / 1e9);
    out += line;
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::snprintf(line, sizeof line, "  %-16s %8.3f (user %.3f, system %.3f)\n", "wall", wall,
                Seconds(ru.ru_utime), Seconds(ru.ru_stime));
  out += line;
  return out;
}

}  // namespace imgcheck::util

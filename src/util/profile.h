// --profile: where a run's time goes, stage by stage, printed to stderr at its end. Off unless
// EnableProfile() was called; then a ProfileSpan costs two clock reads. Thread-safe: the
// stages that run on several threads (reading layers) add up thread time, so they can exceed
// the wall time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace imgcheck::util {

enum class Stage {
  kRead,      ///< reading layers: every layer's reading on its thread, all of it (thread time)
  kBlobRead,  ///< of which: the blob's bytes from the file, registry or daemon (and the kernel)
  kInflate,   ///< of which: decompressing (gzip, zstd) into the tar stream, blob read included
  kHashWait,  ///< of which: waiting for a SHA-256 thread to be done with a buffer
  kCapture,   ///< of which: the capturers (ELF parts, prefixes, MD5s) fed the files' bytes
  kCache,     ///< looking up and storing readings in the layer cache (thread time)
  kMerge,     ///< merging the layers' readings into the tree, in order
  kCatalog,   ///< catalog::Build
  kLoader,    ///< the loader's link maps of every consumer
  kRules,     ///< the checks
  kBind,      ///< of which: binding every link map's symbols (IC013)
  kReport,    ///< writing the report
  kCount
};

void EnableProfile();
bool ProfileEnabled();
/// Adds `ns` nanoseconds to `stage`.
void AddProfile(Stage stage, uint64_t ns);
/// One line per stage that ran ("  catalog        0.123 s"), then the process's wall, user and
/// system time since EnableProfile(). "" when not enabled.
std::string ProfileText();

/// Adds its lifetime to `stage` (when the profile is on).
class ProfileSpan {
 public:
  explicit ProfileSpan(Stage stage)
      : stage_(stage), on_(ProfileEnabled()), start_(on_ ? Clock::now() : Clock::time_point{}) {}
  ~ProfileSpan() {
    if (on_)
      AddProfile(
          stage_,
          static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count()));
  }
  ProfileSpan(const ProfileSpan&) = delete;
  ProfileSpan& operator=(const ProfileSpan&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  Stage stage_;
  bool on_;
  Clock::time_point start_;
};

}  // namespace imgcheck::util

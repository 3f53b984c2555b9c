// SIGINT and SIGTERM during a probe: neither the staging directory nor the process group running
// the image's code may outlive imgcheck. The signal handler only writes the signal's number to a
// pipe (async-signal-safe); a watcher thread does the cleanup and exits.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>

namespace imgcheck::probe {

/// While one lives, SIGINT and SIGTERM make imgcheck kill every registered process group
/// (SIGKILL), remove every registered directory, print one line on stderr and exit with 128 +
/// the signal's number, as a shell reports a process the signal killed. The previous handlers
/// come back when it dies. Nested objects share the outermost one's watcher.
class InterruptCleanup {
 public:
  InterruptCleanup();
  ~InterruptCleanup();
  InterruptCleanup(const InterruptCleanup&) = delete;
  InterruptCleanup& operator=(const InterruptCleanup&) = delete;
};

/// Runs `create`, which makes a directory and returns its path, and registers the path for
/// removal on interruption; the cleanup is held off meanwhile, so a signal falls before the
/// directory exists or after it is registered. Registering costs nothing without a live
/// InterruptCleanup.
std::filesystem::path CreateDirRemovedOnInterrupt(
    const std::function<std::filesystem::path()>& create);
/// After its owner removed it.
void ForgetDir(const std::filesystem::path& dir);

/// Runs `spawn`, which starts a process leading its own process group and returns its pid (or -1),
/// and registers the group to be killed on interruption, the cleanup held off meanwhile.
pid_t SpawnKilledOnInterrupt(const std::function<pid_t()>& spawn);
/// Kills what is left of the group (SIGKILL) and forgets it. Call it before reaping the leader,
/// whose zombie keeps the group id from being reused.
void KillGroup(pid_t pgid);

}  // namespace imgcheck::probe

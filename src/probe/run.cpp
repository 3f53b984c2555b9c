#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "probe/interrupt.h"
#include "probe/probe.h"
#include "util/error.h"

namespace imgcheck::probe {
namespace {

constexpr size_t kMaxStdout = 4u << 20;  // the probe prints a few KiB; more is not a result
constexpr size_t kKeepStderr = 16u << 10;

// The loader variables of this process must not reach the probe: a host LD_LIBRARY_PATH would
// let host CUDA libraries stand in for the image's.
bool KeepInChildEnv(std::string_view var) {
  for (std::string_view drop : {"LD_LIBRARY_PATH=", "LD_PRELOAD=", "LD_AUDIT="})
    if (var.starts_with(drop)) return false;
  return true;
}

std::string LastStage(const std::string& err) {
  constexpr std::string_view kMark = "imgcheck-probe: stage ";
  size_t at = err.rfind(kMark);
  if (at == std::string::npos) return "";
  size_t end = err.find('\n', at);
  return err.substr(at + kMark.size(), end == std::string::npos ? end : end - at - kMark.size());
}

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (pipe2(fd, O_CLOEXEC) != 0) throw util::Fatal(std::string("pipe: ") + std::strerror(errno));
  }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
  void CloseWrite() {
    close(fd[1]);
    fd[1] = -1;
  }
};

}  // namespace

std::filesystem::path ProbeExecutable() {
  if (const char* env = std::getenv("IMGCHECK_PROBE_HELPER"); env && *env) return env;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path("imgcheck-probe") : self.parent_path() / "imgcheck-probe";
}

Observation RunProbe(const std::vector<std::pair<std::string, std::string>>& libraries,
                     const RunOptions& options) {
  std::vector<std::string> args = {options.executable.string(), "--cpu-seconds",
                                   std::to_string(options.cpu_seconds), "--wall-seconds",
                                   std::to_string(options.wall_seconds + 5)};
  if (!options.libcuda.empty()) {
    args.push_back("--libcuda");
    args.push_back(options.libcuda);
  }
  for (const auto& [role, path] : libraries) {
    args.push_back("--lib");
    args.push_back(role + "=" + path);
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (KeepInChildEnv(*e)) envp.push_back(*e);
  envp.push_back(nullptr);

  Pipe out, err;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a timeout kills whatever it started
  pid_t pid = -1;
  int rc = 0;
  SpawnKilledOnInterrupt([&] {
    rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp.data());
    return rc == 0 ? pid : -1;
  });
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw util::Fatal("cannot run " + options.executable.string() + ": " + std::strerror(rc));
  out.CloseWrite();
  err.CloseWrite();

  std::string stdout_text, stderr_text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.wall_seconds);
  bool timed_out = false;
  pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    int n = poll(fds, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& dst = i == 0 ? stdout_text : stderr_text;
      if (i == 0 && dst.size() < kMaxStdout) dst.append(buf, static_cast<size_t>(got));
      if (i == 1) {
        dst.append(buf, static_cast<size_t>(got));
        if (dst.size() > 2 * kKeepStderr) dst.erase(0, dst.size() - kKeepStderr);
      }
    }
  }
  // Kill the group whatever happened: the child may have left helpers behind, and if it has
  // already exited this is harmless (the group is empty). Its zombie, not yet reaped, keeps the
  // group id from being reused until then.
  if (timed_out) kill(-pid, SIGKILL);
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  KillGroup(pid);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  Observation o = ParseObservation(stdout_text);
  o.last_stage = LastStage(stderr_text);
  if (timed_out) {
    o.outcome = Observation::Outcome::kTimedOut;
    o.reason = "imgcheck-probe did not finish within " + std::to_string(options.wall_seconds) +
               " s and was killed";
  } else if (WIFSIGNALED(status)) {
    o.outcome = Observation::Outcome::kCrashed;
    int sig = WTERMSIG(status);
    o.reason =
        "imgcheck-probe was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  } else if (o.outcome == Observation::Outcome::kBadOutput) {
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::string tail =
        stderr_text.size() > 400 ? stderr_text.substr(stderr_text.size() - 400) : stderr_text;
    o.reason += " (exit " + std::to_string(code) + ")" + (tail.empty() ? "" : ": " + tail);
  }
  if (!o.last_stage.empty() && o.outcome != Observation::Outcome::kRan &&
      o.outcome != Observation::Outcome::kNoGpu)
    o.reason += ", during stage '" + o.last_stage + "'";
  return o;
}

}  // namespace imgcheck::probe

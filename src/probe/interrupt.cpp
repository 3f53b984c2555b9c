#include "probe/interrupt.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "util/error.h"

namespace imgcheck::probe {
namespace {

namespace fs = std::filesystem;

constexpr int kSignals[] = {SIGINT, SIGTERM};

// What an interruption undoes. `mu` is taken by the cleanup and never released: imgcheck exits
// holding it, so nothing new is created meanwhile.
struct Registry {
  std::mutex mu;
  std::set<fs::path> dirs;
  std::set<pid_t> groups;
};

Registry& State() {
  static Registry r;
  return r;
}

// The watcher, installed by the outermost InterruptCleanup.
std::mutex g_install_mu;
int g_depth = 0;
int g_pipe[2] = {-1, -1};
std::atomic<int> g_signal_fd{-1};
std::thread g_watcher;
struct sigaction g_previous[std::size(kSignals)];

extern "C" void OnSignal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  if (int fd = g_signal_fd.load(); fd >= 0) (void)!write(fd, &byte, 1);
  errno = saved;
}

// A concurrent writer may add a file between the listing and the rmdir: try again.
void RemoveAll(const fs::path& dir) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (!ec && !fs::exists(fs::symlink_status(dir, ec))) return;
  }
}

[[noreturn]] void Cleanup(int sig) {
  Registry& r = State();
  r.mu.lock();
  for (pid_t group : r.groups) kill(-group, SIGKILL);
  for (const fs::path& dir : r.dirs) RemoveAll(dir);
  std::string line = std::string("imgcheck: interrupted by ") +
                     (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                     ": stopped imgcheck-probe and removed its staging directory\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
  _exit(128 + sig);
}

void Watch(int fd) {
  while (true) {
    unsigned char byte = 0;
    ssize_t n = read(fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == 0) return;  // 0: the last InterruptCleanup is going away
    Cleanup(byte);
  }
}

}  // namespace

InterruptCleanup::InterruptCleanup() {
  std::lock_guard lock(g_install_mu);
  if (g_depth++ > 0) return;
  if (pipe2(g_pipe, O_CLOEXEC) != 0) {
    --g_depth;
    throw util::Fatal(std::string("pipe: ") + std::strerror(errno));
  }
  fcntl(g_pipe[1], F_SETFL, O_NONBLOCK);  // a handler never blocks on a full pipe
  g_signal_fd = g_pipe[1];
  g_watcher = std::thread(Watch, g_pipe[0]);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
}

InterruptCleanup::~InterruptCleanup() {
  std::lock_guard lock(g_install_mu);
  if (--g_depth > 0) return;
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  g_signal_fd = -1;
  unsigned char stop = 0;
  while (write(g_pipe[1], &stop, 1) < 0 && errno == EINTR) {
  }
  g_watcher.join();  // a signal already in the pipe is handled first: Cleanup exits
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

fs::path CreateDirRemovedOnInterrupt(const std::function<fs::path()>& create) {
  Registry& r = State();
  std::lock_guard lock(r.mu);
  fs::path dir = create();
  r.dirs.insert(dir);
  return dir;
}

void ForgetDir(const fs::path& dir) {
  Registry& r = State();
  std::lock_guard lock(r.mu);
  r.dirs.erase(dir);
}

pid_t SpawnKilledOnInterrupt(const std::function<pid_t()>& spawn) {
  Registry& r = State();
  std::lock_guard lock(r.mu);
  pid_t pid = spawn();
  if (pid > 0) r.groups.insert(pid);
  return pid;
}

void KillGroup(pid_t pgid) {
  Registry& r = State();
  std::lock_guard lock(r.mu);
  kill(-pgid, SIGKILL);
  r.groups.erase(pgid);
}

}  // namespace imgcheck::probe

// InterruptCleanup in a child process of the test: a signal ends it with 128 + the signal, the
// registered directory removed and the registered process group killed.
#include "probe/interrupt.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "support.h"

namespace imgcheck::probe {
namespace {

namespace fs = std::filesystem;

// Runs `body` in a forked child and returns its wait status.
template <class F>
int InChild(F body) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST_CASE("an interrupted probe leaves no directory and no process of its group") {
  for (int sig : {SIGTERM, SIGINT}) {
    imgcheck::testing::TempDir dir;
    fs::path staging = dir / "staging";
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    int status = InChild([&] {
      InterruptCleanup cleanup;
      CreateDirRemovedOnInterrupt([&] {
        fs::create_directory(staging);
        return staging;
      });
      imgcheck::testing::WriteFile(staging / "libcudnn.so.9", "bytes");
      pid_t group = SpawnKilledOnInterrupt([] {
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);
        char sh[] = "/bin/sh", c[] = "-c", cmd[] = "sleep 600 & sleep 600";
        char* argv[] = {sh, c, cmd, nullptr};
        pid_t pid = -1;
        posix_spawn(&pid, "/bin/sh", nullptr, &attr, argv, environ);
        posix_spawnattr_destroy(&attr);
        return pid;
      });
      (void)!write(fds[1], &group, sizeof group);
      kill(getpid(), sig);
      for (;;) pause();  // the watcher exits the process
    });
    close(fds[1]);
    pid_t group = 0;
    REQUIRE(read(fds[0], &group, sizeof group) == sizeof group);
    close(fds[0]);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + sig);
    CHECK_FALSE(fs::exists(staging));
    // SIGKILL lands asynchronously: wait for it.
    imgcheck::testing::Eventually([&] { return imgcheck::testing::LiveInGroup(group) == 0; });
    CHECK(imgcheck::testing::LiveInGroup(group) == 0);
  }
}

TEST_CASE("without a signal, InterruptCleanup restores the previous handlers") {
  struct sigaction before {};
  sigaction(SIGTERM, nullptr, &before);
  {
    InterruptCleanup outer;
    InterruptCleanup inner;  // nested: shares the outer one's watcher
  }
  struct sigaction after {};
  sigaction(SIGTERM, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);
}

}  // namespace
}  // namespace imgcheck::probe

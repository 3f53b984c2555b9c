// Helpers the tests share to generate their fixtures: temp dirs, shell commands, shared objects.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace imgcheck::testing {

/// A private directory removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int status = -1;     ///< exit status, or -1 when it did not exit normally
  std::string output;  ///< stdout and stderr together
};
/// Runs `command` through /bin/sh, capturing its output.
CommandResult Run(const std::string& command);
/// True when `program` is on PATH.
bool HaveProgram(const std::string& program);
/// A TCP port free on 127.0.0.1 just now (bound to 0, read back, closed), for a server a test
/// starts.
int FreeLoopbackPort();

/// A process as /proc/PID/stat shows it.
struct ProcessInfo {
  int pid = 0, ppid = 0, pgid = 0;
  char state = '?';  ///< 'Z': dead, not yet reaped
};
/// Every process of this machine.
std::vector<ProcessInfo> Processes();
/// Processes of group `pgid` that are alive (a zombie is dead, waiting for its parent or init).
size_t LiveInGroup(int pgid);
/// Polls `ready` every 50 ms for up to a minute and returns whether it held: a bounded wait for
/// something asynchronous (a signal's delivery), not a timing assertion.
bool Eventually(const std::function<bool()>& ready);

void WriteFile(const std::filesystem::path& path, const std::string& content);
std::string ReadFile(const std::filesystem::path& path);

/// A shared object compiled from C source by the system compiler.
struct SharedObject {
  std::string soname;  ///< DT_SONAME, empty for none
  std::string source = "int imgcheck_fixture_symbol(void) { return 1; }\n";
  std::vector<std::string> needed;  ///< libraries to link against, as paths to other .so files
  std::string rpath;                ///< DT_RPATH (written with --disable-new-dtags)
  std::string runpath;              ///< DT_RUNPATH
  std::string version_script;       ///< content of a linker version script, if any
  std::vector<std::string> extra_flags;
  bool executable = false;  ///< a program (with an interpreter; `source` has main)
};
/// Compiles `so` to `out` (creating parent dirs; a program when so.executable); throws
/// std::runtime_error with the compiler's output if it fails.
void Compile(const SharedObject& so, const std::filesystem::path& out);

/// Exit status of a test executable that skipped a test case and failed none (SKIP_RETURN_CODE).
constexpr int kSkipExitCode = 77;
/// Marks the running test case as skipped because something it needs is missing here; the case
/// then returns (`return Skip("umoci not installed");`). Defined with the test main.
void Skip(const std::string& why);

/// Directory holding the built imgcheck binaries (set by CMake).
std::filesystem::path BinaryDir();
/// `p` in single quotes, for a shell command line.
std::string Quote(const std::filesystem::path& p);
/// The built imgcheck, quoted, followed by `args`: a shell command line for Run().
std::string ImgcheckCommand(const std::string& args);
/// ImgcheckCommand for hostile input: the resource model's promise made a hard bound. The run gets
/// 1 GiB of data memory (RLIMIT_DATA: heap and private mappings; not under AddressSanitizer,
/// whose shadow would not fit) and is killed after `seconds`, so an amplification fails with
/// bad_alloc and a hang ends with status 137 instead of stalling the suite.
std::string HostileCommand(const std::string& args, int seconds = 60);
/// The source tree root (set by CMake).
std::filesystem::path SourceDir();

}  // namespace imgcheck::testing

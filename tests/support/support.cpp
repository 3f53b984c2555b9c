#include "support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace imgcheck::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "imgcheck-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Fixtures may contain read-only directories; make them writable before removal.
  Run("chmod -R u+rwX '" + path_.string() + "' 2>/dev/null");
  std::filesystem::remove_all(path_, ec);
}

CommandResult Run(const std::string& command) {
  CommandResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

bool HaveProgram(const std::string& program) {
  return Run("command -v '" + program + "' >/dev/null").status == 0;
}

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port on 127.0.0.1");
  close(fd);
  return ntohs(a.sin_port);
}

std::vector<ProcessInfo> Processes() {
  std::vector<ProcessInfo> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::ifstream in(e.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    size_t close = stat.rfind(')');  // "pid (comm) state ppid pgrp ...": comm may hold anything
    if (close == std::string::npos) continue;
    ProcessInfo p;
    p.pid = std::atoi(stat.c_str());
    std::istringstream rest(stat.substr(close + 1));
    rest >> p.state >> p.ppid >> p.pgid;
    out.push_back(p);
  }
  return out;
}

size_t LiveInGroup(int pgid) {
  size_t n = 0;
  for (const auto& p : Processes()) n += p.pgid == pgid && p.state != 'Z';
  return n;
}

bool Eventually(const std::function<bool()>& ready) {
  for (int i = 0; i < 1200; ++i) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void WriteFile(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary);
  f << content;
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void Compile(const SharedObject& so, const std::filesystem::path& out) {
  std::filesystem::create_directories(out.parent_path());
  std::filesystem::path src = out.string() + ".c";
  WriteFile(src, so.source);
  std::string cmd = std::string(so.executable ? "cc" : "cc -shared -fPIC") + " -o '" +
                    out.string() + "' '" + src.string() + "'";
  if (!so.soname.empty()) cmd += " -Wl,-soname," + so.soname;
  if (!so.rpath.empty()) cmd += " -Wl,--disable-new-dtags -Wl,-rpath,'" + so.rpath + "'";
  if (!so.runpath.empty()) cmd += " -Wl,--enable-new-dtags -Wl,-rpath,'" + so.runpath + "'";
  if (!so.version_script.empty()) {
    std::filesystem::path vs = out.string() + ".map";
    WriteFile(vs, so.version_script);
    cmd += " -Wl,--version-script='" + vs.string() + "'";
  }
  for (const auto& n : so.needed) cmd += " '" + n + "'";
  for (const auto& f : so.extra_flags) cmd += " " + f;
  CommandResult r = Run(cmd);
  std::filesystem::remove(src);
  if (r.status != 0) throw std::runtime_error("compile failed: " + cmd + "\n" + r.output);
}

std::filesystem::path BinaryDir() { return IMGCHECK_BINARY_DIR; }
std::string Quote(const std::filesystem::path& p) { return "'" + p.string() + "'"; }
std::string ImgcheckCommand(const std::string& args) {
  return Quote(BinaryDir() / "imgcheck") + " " + args;
}
// AddressSanitizer reserves terabytes of shadow memory, which RLIMIT_DATA refuses. gcc says
// __SANITIZE_ADDRESS__, clang __has_feature(address_sanitizer).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IMGCHECK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define IMGCHECK_ASAN 1
#endif
std::string HostileCommand(const std::string& args, int seconds) {
#if defined(IMGCHECK_ASAN)
  const std::string memory;
#else
  const std::string memory = "ulimit -d 1048576 && ";
#endif
  return memory + "exec timeout -s KILL " + std::to_string(seconds) + " " + ImgcheckCommand(args);
}
std::filesystem::path SourceDir() { return IMGCHECK_SOURCE_DIR; }

}  // namespace imgcheck::testing

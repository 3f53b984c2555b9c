#include "image/docker_daemon.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "image/registry_http.h"
#include "util/error.h"

namespace imgcheck::image {

namespace {

constexpr uint64_t kMaxErrorBody = 1 << 16;

// A private directory (mkdtemp, mode 0700) removed with its contents when it goes.
class SpoolDir {
 public:
  SpoolDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/imgcheck-daemon-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw util::Fatal("docker-daemon: cannot create a spool directory under " +
                        pattern.substr(0, pattern.rfind('/')) + ": " + std::strerror(errno));
    path_ = pattern;
  }
  ~SpoolDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  SpoolDir(const SpoolDir&) = delete;
  SpoolDir& operator=(const SpoolDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The daemon's own words from an error body ({"message": "..."}), else the status.
std::string DaemonMessage(HttpExchange& x) {
  std::string body;
  x.ReadAll(body, kMaxErrorBody);
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string())
    return j["message"].get<std::string>();
  return "HTTP " + std::to_string(x.status());
}

}  // namespace

DaemonEndpoint DaemonFromEnv(const char* docker_host) {
  DaemonEndpoint d;
  d.host = docker_host && *docker_host ? docker_host : "unix:///var/run/docker.sock";
  std::string_view h = d.host;
  if (h.substr(0, 7) == "unix://") {
    d.unix_socket = std::string(h.substr(7));
    d.base_url = "http://localhost";
  } else if (h.substr(0, 6) == "tcp://") {
    d.base_url = "http://" + std::string(h.substr(6));
  } else {
    throw util::Fatal("DOCKER_HOST=" + d.host +
                      ": only unix:///PATH and tcp://HOST:PORT (no TLS) are supported");
  }
  if (d.unix_socket.empty() && d.base_url == "http://")
    throw util::Fatal("DOCKER_HOST=" + d.host + " names no address");
  return d;
}

std::string DaemonExportPath(std::string_view name) {
  std::string n(name);
  size_t slash = n.rfind('/');
  bool tagged = n.find('@') != std::string::npos ||
                n.find(':', slash == std::string::npos ? 0 : slash) != std::string::npos;
  if (!tagged) n += ":latest";
  std::string path = "/images/";
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char c : n) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || std::strchr("-._~/:@", c) != nullptr) {
      path += c;
    } else {
      path += '%';
      path += kHex[u >> 4];
      path += kHex[u & 15];
    }
  }
  return path + "/get";
}

Image LoadDockerDaemon(std::string_view name, const LoadOptions& options) {
  DaemonEndpoint d = DaemonFromEnv(std::getenv("DOCKER_HOST"));
  std::string what = "docker-daemon:" + std::string(name);
  HttpRequest req;
  req.url = d.base_url + DaemonExportPath(name);
  HttpExchange x(req, TlsOptions{}, d.unix_socket);
  if (!x.WaitHeaders())
    throw util::Fatal(what + ": cannot reach the Docker Engine at " + d.host +
                      " (DOCKER_HOST): " + x.error_message());
  if (x.status() != 200)
    throw util::Fatal(what + ": the Docker Engine at " + d.host + " says: " + DaemonMessage(x));
  SpoolDir spool;
  std::string tar = spool.path() + "/image.tar";
  int fd = open(tar.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw util::Fatal(what + ": cannot write " + tar + ": " + std::strerror(errno));
  char buf[1 << 16];
  size_t n;
  bool written = true;
  while (written && (n = x.Read(buf, sizeof buf)) > 0)
    for (size_t off = 0; off < n;) {
      ssize_t w = write(fd, buf + off, n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        written = false;
        break;
      }
      off += static_cast<size_t>(w);
    }
  int write_errno = errno;
  close(fd);
  if (!written)
    throw util::Fatal(what + ": cannot write " + tar + ": " + std::strerror(write_errno));
  if (x.error() != TransportError::kNone)
    throw util::Fatal(what + ": the export from " + d.host + " broke off: " + x.error_message());
  // The archive holds the one image asked for; its RepoTags may spell the name differently.
  return Load("docker-archive:" + tar, options);
}

}  // namespace imgcheck::image

#include "attack.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace imgcheck::testing {

int ConnectFrom(const std::string& from, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, from.c_str(), &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<uint16_t>(port));
  remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

size_t RaiseFileLimit() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  getrlimit(RLIMIT_NOFILE, &r);
  return r.rlim_cur;
}

TlsClient::TlsClient(const std::string& from, int port, std::chrono::milliseconds timeout) {
  fd_ = ConnectFrom(from, port);
  if (fd_ < 0) return;
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ctx_ = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx_);
  SSL_set_fd(ssl, fd_);
  if (SSL_connect(ssl) == 1)
    ssl_ = ssl;
  else
    SSL_free(ssl);
}

TlsClient::~TlsClient() {
  if (ssl_) SSL_free(ssl_);
  if (ctx_) SSL_CTX_free(ctx_);
  if (fd_ >= 0) close(fd_);
}

bool TlsClient::Write(std::string_view bytes) {
  while (ssl_ && !bytes.empty()) {
    int n =
        SSL_write(ssl_, bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), 1 << 20)));
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return ssl_ != nullptr;
}

namespace {

// The length of the first whole response in `bytes`, 0 when it is not all there.
size_t WholeResponse(std::string_view bytes) {
  size_t end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) return 0;
  std::string head(bytes.substr(0, end));
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t length = 0;
  if (size_t at = head.find("content-length:"); at != std::string::npos)
    length = std::stoul(head.substr(at + 15));
  return bytes.size() >= end + 4 + length ? end + 4 + length : 0;
}

}  // namespace

std::string TlsClient::Read(size_t responses) {
  std::string got;
  size_t whole = 0, at = 0;
  char buf[16384];
  while (ssl_ && whole < responses) {
    int n = SSL_read(ssl_, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    while (size_t len = WholeResponse(std::string_view(got).substr(at))) {
      at += len;
      ++whole;
    }
  }
  return got;
}

std::vector<int> StatusCodes(std::string_view bytes) {
  std::vector<int> out;
  while (bytes.substr(0, 9) == "HTTP/1.1 " && bytes.size() >= 12) {
    out.push_back(std::stoi(std::string(bytes.substr(9, 3))));
    size_t len = WholeResponse(bytes);
    if (len == 0) break;
    bytes.remove_prefix(len);
  }
  return out;
}

std::string PostRequest(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

namespace {

long StatusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

}  // namespace

size_t RssBytes(pid_t pid) { return static_cast<size_t>(StatusField(pid, "VmRSS")) * 1024; }
int Threads(pid_t pid) { return static_cast<int>(StatusField(pid, "Threads")); }

}  // namespace imgcheck::testing

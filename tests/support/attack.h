// Hostile HTTPS clients for `imgcheck serve` on loopback: connections from chosen 127.0.0.0/8
// addresses (so that per-client caps can be told apart from the total), TLS handshakes that
// stall, raw request bytes (pipelined, chunked, without length), and a server process's RSS
// and thread count. Used by the serve tests and by bench/serve-attack.
#pragma once

#include <openssl/ssl.h>
#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace imgcheck::testing {

/// A blocking TCP socket connected to 127.0.0.1:`port` from `from` ("127.0.0.2"); -1 when the
/// connection failed.
int ConnectFrom(const std::string& from, int port);

/// Raises the soft descriptor limit to the hard one; returns the soft limit then.
size_t RaiseFileLimit();

/// A TLS client connection over ConnectFrom (the server is not verified: these clients test
/// what the server does with them, not trust).
class TlsClient {
 public:
  TlsClient(const std::string& from, int port, std::chrono::milliseconds timeout);
  ~TlsClient();
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;
  /// Whether the handshake completed.
  bool ok() const { return ssl_ != nullptr; }
  /// Writes all of `bytes`; false when the server closed or reset the connection.
  bool Write(std::string_view bytes);
  /// Reads until `responses` whole HTTP/1.1 responses (framed by Content-Length) are in, the
  /// server closes, or the timeout passes; returns what was read.
  std::string Read(size_t responses);

 private:
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

/// The status codes of the HTTP/1.1 responses in `bytes`, in order.
std::vector<int> StatusCodes(std::string_view bytes);

/// A POST of `body` to `path` with Content-Length.
std::string PostRequest(const std::string& path, const std::string& body);

/// Resident set size of process `pid` in bytes (VmRSS), and its thread count.
size_t RssBytes(pid_t pid);
int Threads(pid_t pid);

}  // namespace imgcheck::testing

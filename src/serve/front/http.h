// The HTTPS server under `imgcheck serve`: one I/O thread (Boost.Beast over Asio and OpenSSL)
// holds every connection, and the handlers that block run on a bounded pool. A slow or idle
// client costs a socket and a few kilobytes, never a thread: the TLS handshake, the request
// headers and the body each have their own deadline, and headers, bodies and connections
// (per peer and in all) their own caps.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace imgcheck::serve::front {

class Connection;

struct HttpLimits {
  std::chrono::milliseconds handshake{5000};  ///< TCP accept to TLS established
  std::chrono::milliseconds headers{5000};    ///< first byte of a request to its last header
  std::chrono::milliseconds body{10000};      ///< the body, once the headers are in
  std::chrono::milliseconds idle{60000};      ///< keep-alive: waiting for the next request
  std::chrono::milliseconds write{10000};     ///< writing one answer
  size_t max_header_bytes = 16 << 10;         ///< request line and headers (431 beyond)
  size_t max_header_fields = 100;             ///< header lines (431 beyond)
  size_t max_body = 3 << 20;  ///< any framing: Content-Length, chunked (413); none: 411
  /// Body bytes held at once by all requests (a request that would pass it gets 503), so that
  /// many connections sending large bodies together cannot exhaust memory.
  size_t body_budget = 192 << 20;
  size_t max_connections = 4096;  ///< open at once (also held under RLIMIT_NOFILE)
  size_t max_per_peer = 512;      ///< open at once from one client address
  int backlog = 1024;             ///< listen(2)'s queue of completed connections
  int workers = 64;               ///< blocking handlers running at once
  size_t queue = 1024;            ///< blocking handlers waiting for a worker (503 beyond)
};

struct HttpRequest {
  std::string method, path, query;  ///< "/v1/admission", "timeout=10s"
  std::string body;
  std::string peer;  ///< the client's address
  /// The value of query parameter `name` (as sent, not decoded); empty when absent.
  std::string Param(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  /// What became of connections and requests: "refused_total", "refused_peer", "body_budget",
  /// "busy", "timeout"... (for metrics).
  using Counter = std::function<void(std::string_view event)>;

  /// `tls` finishes the context (certificates, client CA); false fails the construction
  /// (util::Fatal with `tls_error`).
  HttpServer(HttpLimits limits, const std::function<bool(SSL_CTX*, std::string& error)>& tls);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Serves `method` `path` with `handler`: on the I/O thread when `quick` (it must not block:
  /// health, metrics), else on the pool.
  void Route(std::string method, std::string path, bool quick, Handler handler);
  /// Called on the I/O thread after each answer (path as routed, "other" when unknown).
  void OnAnswer(std::function<void(const std::string& path, int status)> f);
  void OnEvent(Counter f);
  /// Binds and listens; returns the port (useful with port 0). util::Fatal when it cannot.
  int Listen(const std::string& host, int port);
  /// Runs the I/O loop on this thread until Stop's work is done.
  void Run();
  /// Thread-safe. Stops accepting, closes connections that are not in the middle of a
  /// request, answers the others (closing them after), and makes Run return once none is
  /// left, or at `hard` whatever remains.
  void Stop(std::chrono::steady_clock::time_point hard);
  /// Blocking handlers queued or running.
  size_t Busy() const;

 private:
  friend class Connection;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace imgcheck::serve::front

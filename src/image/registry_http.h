// One HTTP exchange over libcurl, read pull-style: a curl multi handle drives a single easy
// handle only while the caller asks for bytes, and the transfer pauses when the bounded buffer
// is full, so a blob streams through in constant memory. Redirects, auth and retries are the
// caller's (registry.cpp): this layer reports what happened and never throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace imgcheck::image {

struct TlsOptions {
  bool verify = true;
  std::string ca_pem;       ///< extra CA certificates (PEM), trusted besides the system ones
  std::string client_cert;  ///< PEM file of a client certificate, with client_key
  std::string client_key;
};

struct HttpRequest {
  std::string method = "GET";  ///< "GET", "HEAD", or "POST" / "PUT" (with `body`)
  std::string url;
  std::vector<std::string> headers;  ///< "Name: value"
  std::string body;                  ///< sent with POST and PUT (a copy is kept while sending)
};

/// What a server must send per read_timeout of waiting, at least.
inline constexpr uint64_t kMinStallBytes = 1024;

/// Time bounds of one exchange (util::Limits::read_timeout_s and deadline_s).
struct HttpBounds {
  /// Waiting this long for the server (time spent by the reader elsewhere does not count) while
  /// it sends less than kMinStallBytes: the exchange has stalled (a server that drips one byte a
  /// second included).
  std::chrono::seconds read_timeout{60};
  /// What the server must send per read_timeout of waiting (--min-rate times it, at least
  /// kMinStallBytes): less, and the exchange is abandoned as too slow.
  uint64_t min_bytes = kMinStallBytes;
  /// The end of the whole operation the exchange is part of; past it the exchange stops.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

enum class TransportError {
  kNone,
  kTls,          ///< handshake or certificate failure
  kConnect,      ///< refused, unreachable, name not resolved
  kInterrupted,  ///< the connection broke or stalled mid-response
  kDeadline,     ///< HttpBounds::deadline passed
  kOther,
};

/// What exchanges to one registry keep warm between them for a long-lived process (serve): open
/// connections, TLS sessions and DNS answers (a libcurl share, CURL_LOCK_DATA_CONNECT,
/// _SSL_SESSION and _DNS). A reused connection skips the TCP and TLS handshakes and with them the
/// CA bundle's parsing, which libcurl 7.88 caches per multi handle only (CURLOPT_CA_CACHE_TIMEOUT),
/// not in a share. Thread-safe; it must outlive the exchanges that use it.
class ConnectionShare {
 public:
  ConnectionShare();
  ~ConnectionShare();
  ConnectionShare(const ConnectionShare&) = delete;
  ConnectionShare& operator=(const ConnectionShare&) = delete;
  /// The libcurl share; null when libcurl could not be loaded (exchanges then start cold).
  void* handle() const { return share_; }

 private:
  struct Locks;
  std::unique_ptr<Locks> locks_;
  void* share_ = nullptr;
};

/// One ConnectionShare per registry origin, made on first use: at most `limit` origins, later
/// ones start cold (a pod spec names the registries, and each share holds connections).
class ConnectionShares {
 public:
  explicit ConnectionShares(size_t limit = 64) : limit_(limit) {}
  /// The share of `origin` ("scheme://host:port"); null past the limit.
  ConnectionShare* For(const std::string& origin);
  /// The API root ("https://host:port" or "http://...") a client chose and checked for `host`
  /// (`GET /v2/`) less than kPingFresh ago; "" when none. A client that finds one skips its
  /// ping: a local registry that speaks http would otherwise cost every client a failed TLS
  /// handshake, with its CA bundle parsed, and two round trips.
  std::string CheckedApi(const std::string& host);
  void RememberApi(const std::string& host, const std::string& api);
  static constexpr std::chrono::seconds kPingFresh{60};

 private:
  size_t limit_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<ConnectionShare>> shares_;
  // host -> the API root, and when it was checked
  std::map<std::string, std::pair<std::string, std::chrono::steady_clock::time_point>> apis_;
};

class HttpExchange {
 public:
  /// `unix_socket`: connect there instead of to the URL's host (the Docker Engine API). `share`:
  /// connections and TLS sessions kept warm across exchanges (null: this exchange's own).
  HttpExchange(const HttpRequest& request, const TlsOptions& tls,
               const std::string& unix_socket = "", const HttpBounds& bounds = {},
               ConnectionShare* share = nullptr);
  ~HttpExchange();
  HttpExchange(const HttpExchange&) = delete;
  HttpExchange& operator=(const HttpExchange&) = delete;

  /// Runs the exchange until the final response's headers are in. False on a transport error.
  bool WaitHeaders();
  long status() const;
  /// The last value of header `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const;
  /// Reads up to `n` body bytes; 0 at the end of the body or on a transport error.
  size_t Read(char* out, size_t n);
  /// Reads the rest of the body; false when it exceeds `limit` (reading stops there).
  bool ReadAll(std::string& out, uint64_t limit);

  /// New connections this exchange opened (0: a kept one was reused).
  long new_connections() const;
  TransportError error() const;
  std::string error_message() const;  ///< curl's words, one line
  /// Stalled under a rate floor (HttpBounds::min_bytes above kMinStallBytes): the server
  /// answers, too slowly to be worth waiting for; resuming would hold the reader as long.
  bool too_slow() const;
  const std::string& url() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
  bool Pump();
};

/// Resolves `location` (absolute or relative) against `base`; empty when it cannot.
std::string ResolveUrl(const std::string& base, const std::string& location);
/// "scheme://host:port" of an absolute URL, with the default port filled in; "" when invalid.
/// Credentials go only to the origin they were meant for.
std::string UrlOrigin(const std::string& url);
/// The lower-case host (IPv6 in brackets) and the port (the scheme's default filled in) of an
/// absolute URL; false when it is not one.
bool UrlHostPort(const std::string& url, std::string& host, std::string& port);
/// Percent-encodes a query parameter value.
std::string UrlEscape(std::string_view s);

}  // namespace imgcheck::image

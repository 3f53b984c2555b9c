#include "image/registry_http.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <utility>

#include "image/curl_lib.h"
#include "util/text.h"

namespace imgcheck::image {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kBufferMax = 1 << 20;  // body bytes held before the transfer pauses
constexpr int kPollMs = 500;
constexpr long kConnectTimeoutS = 30;
constexpr size_t kMaxHeaderBytes = 256 << 10;  // a response's headers, all together

}  // namespace

struct HttpExchange::State {
  const CurlLib* curl = nullptr;  // nullptr: libcurl could not be loaded (CurlLoadError)
  CURL* easy = nullptr;
  CURLM* multi = nullptr;
  curl_slist* headers = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::string url;
  std::string buf;  // body bytes not yet read, from `pos`
  size_t pos = 0;
  bool paused = false;
  bool done = false;
  bool stalled = false;
  bool deadline_passed = false;
  HttpBounds bounds;
  // The stall window: time spent waiting in Pump, and the bytes that came meanwhile.
  Clock::duration waited{};
  uint64_t window_bytes = 0;
  CURLcode result = CURLE_OK;
  bool headers_done = false;
  long status = 0;
  size_t header_bytes = 0;
  std::vector<std::pair<std::string, std::string>> response_headers;

  static size_t OnHeader(char* data, size_t size, size_t n, void* user) {
    auto* s = static_cast<State*>(user);
    size_t len = size * n;
    s->header_bytes += len;
    if (s->header_bytes > kMaxHeaderBytes) return 0;  // aborts the transfer: a hostile server
    std::string_view line = util::Trim(std::string_view(data, len));
    s->window_bytes += len;
    if (line.starts_with("HTTP/")) {  // a new response (after 1xx): forget the last one's headers
      s->response_headers.clear();
      s->headers_done = false;
      size_t sp = line.find(' ');
      s->status =
          sp == std::string_view::npos ? 0 : std::atol(std::string(line.substr(sp + 1, 3)).c_str());
    } else if (line.empty()) {
      if (s->status >= 200) s->headers_done = true;
    } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
      s->response_headers.emplace_back(util::AsciiLower(util::Trim(line.substr(0, colon))),
                                       std::string(util::Trim(line.substr(colon + 1))));
    }
    return len;
  }

  static size_t OnBody(char* data, size_t size, size_t n, void* user) {
    auto* s = static_cast<State*>(user);
    if (s->buf.size() - s->pos >= kBufferMax) {
      s->paused = true;
      return CURL_WRITEFUNC_PAUSE;  // libcurl keeps this chunk and offers it again on unpause
    }
    if (s->pos == s->buf.size()) {
      s->buf.clear();
      s->pos = 0;
    } else if (s->pos >= kBufferMax) {
      s->buf.erase(0, s->pos);
      s->pos = 0;
    }
    s->buf.append(data, size * n);
    s->window_bytes += size * n;
    return size * n;
  }
};

// libcurl locks each kind of shared data through these, from any thread.
struct ConnectionShare::Locks {
  std::array<std::mutex, CURL_LOCK_DATA_LAST> mu;
  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* user) {
    static_cast<Locks*>(user)->mu.at(static_cast<size_t>(data)).lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* user) {
    static_cast<Locks*>(user)->mu.at(static_cast<size_t>(data)).unlock();
  }
};

ConnectionShare::ConnectionShare() : locks_(std::make_unique<Locks>()) {
  const CurlLib* lib = Curl();
  if (lib == nullptr) return;
  const CurlLib& c = *lib;
  CURLSH* sh = c.share_init();
  if (sh == nullptr) return;
  bool ok = c.share_setopt(sh, CURLSHOPT_LOCKFUNC, &Locks::Lock) == CURLSHE_OK &&
            c.share_setopt(sh, CURLSHOPT_UNLOCKFUNC, &Locks::Unlock) == CURLSHE_OK &&
            c.share_setopt(sh, CURLSHOPT_USERDATA, locks_.get()) == CURLSHE_OK;
  for (curl_lock_data d : {CURL_LOCK_DATA_CONNECT, CURL_LOCK_DATA_SSL_SESSION, CURL_LOCK_DATA_DNS})
    ok = ok && c.share_setopt(sh, CURLSHOPT_SHARE, d) == CURLSHE_OK;
  if (!ok) {
    c.share_cleanup(sh);
    return;
  }
  share_ = sh;
}

ConnectionShare::~ConnectionShare() {
  if (share_ != nullptr) Curl()->share_cleanup(static_cast<CURLSH*>(share_));
}

ConnectionShare* ConnectionShares::For(const std::string& origin) {
  std::lock_guard lock(mu_);
  auto it = shares_.find(origin);
  if (it != shares_.end()) return it->second.get();
  if (shares_.size() >= limit_) return nullptr;
  return shares_.emplace(origin, std::make_unique<ConnectionShare>()).first->second.get();
}

std::string ConnectionShares::CheckedApi(const std::string& host) {
  std::lock_guard lock(mu_);
  auto it = apis_.find(host);
  if (it == apis_.end() || Clock::now() - it->second.second >= kPingFresh) return "";
  return it->second.first;
}

void ConnectionShares::RememberApi(const std::string& host, const std::string& api) {
  std::lock_guard lock(mu_);
  if (apis_.size() >= limit_ && !apis_.count(host)) return;
  apis_[host] = {api, Clock::now()};
}

HttpExchange::HttpExchange(const HttpRequest& request, const TlsOptions& tls,
                           const std::string& unix_socket, const HttpBounds& bounds,
                           ConnectionShare* share)
    : s_(std::make_unique<State>()) {
  s_->url = request.url;
  s_->bounds = bounds;
  s_->curl = Curl();
  if (s_->curl == nullptr) {
    s_->done = true;
    s_->result = CURLE_FAILED_INIT;
    return;
  }
  const CurlLib& c = *s_->curl;
  s_->easy = c.easy_init();
  s_->multi = c.multi_init();
  if (s_->easy == nullptr || s_->multi == nullptr) {
    s_->done = true;
    s_->result = CURLE_OUT_OF_MEMORY;
    return;
  }
  CURL* e = s_->easy;
  for (const auto& h : request.headers) s_->headers = c.slist_append(s_->headers, h.c_str());
  c.easy_setopt(e, CURLOPT_URL, request.url.c_str());
  if (!unix_socket.empty()) c.easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, unix_socket.c_str());
  c.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  if (share != nullptr && share->handle() != nullptr)
    c.easy_setopt(e, CURLOPT_SHARE, static_cast<CURLSH*>(share->handle()));
  c.easy_setopt(e, CURLOPT_HTTPHEADER, s_->headers);
  // One connection per exchange, paused at will: HTTP/2's multiplexing would buy nothing.
  c.easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  c.easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);  // the caller decides where credentials go
  c.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  long connect_s = kConnectTimeoutS;
  if (bounds.deadline != Clock::time_point::max()) {
    auto left = std::chrono::ceil<std::chrono::seconds>(bounds.deadline - Clock::now()).count();
    connect_s = std::clamp<long>(static_cast<long>(left), 1, kConnectTimeoutS);
  }
  c.easy_setopt(e, CURLOPT_CONNECTTIMEOUT, connect_s);
  c.easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  c.easy_setopt(e, CURLOPT_USERAGENT, "imgcheck/0.1");
  c.easy_setopt(e, CURLOPT_ERRORBUFFER, s_->errbuf);
  c.easy_setopt(e, CURLOPT_HEADERFUNCTION, &State::OnHeader);
  c.easy_setopt(e, CURLOPT_HEADERDATA, s_.get());
  c.easy_setopt(e, CURLOPT_WRITEFUNCTION, &State::OnBody);
  c.easy_setopt(e, CURLOPT_WRITEDATA, s_.get());
  if (request.method == "HEAD") c.easy_setopt(e, CURLOPT_NOBODY, 1L);
  if (request.method == "POST" || request.method == "PUT") {
    // POSTFIELDS with a size sends the bytes as they are (no chunking, no form encoding).
    c.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    c.easy_setopt(e, CURLOPT_COPYPOSTFIELDS, request.body.data());
    if (request.method == "PUT") c.easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
  }
  if (!tls.verify) {
    c.easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    c.easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!tls.ca_pem.empty()) {
    // Added to the default CA file, which libcurl still loads (OpenSSL backend).
    curl_blob blob{const_cast<char*>(tls.ca_pem.data()), tls.ca_pem.size(), CURL_BLOB_COPY};
    c.easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
  }
  if (!tls.client_cert.empty()) {
    c.easy_setopt(e, CURLOPT_SSLCERT, tls.client_cert.c_str());
    c.easy_setopt(e, CURLOPT_SSLKEY, tls.client_key.c_str());
  }
  c.multi_add_handle(s_->multi, e);
}

HttpExchange::~HttpExchange() {
  if (s_->curl == nullptr) return;
  const CurlLib& c = *s_->curl;
  if (s_->multi != nullptr && s_->easy != nullptr) c.multi_remove_handle(s_->multi, s_->easy);
  if (s_->easy != nullptr) c.easy_cleanup(s_->easy);
  if (s_->multi != nullptr) c.multi_cleanup(s_->multi);
  c.slist_free_all(s_->headers);
}

// One step of the transfer; false once it has finished.
bool HttpExchange::Pump() {
  State& s = *s_;
  if (s.done) return false;
  const CurlLib& c = *s.curl;  // not done: loaded
  Clock::time_point start = Clock::now();
  if (s.paused) {
    s.paused = false;
    c.easy_pause(s.easy, CURLPAUSE_CONT);  // may deliver the held chunk right here
  }
  size_t before = s.buf.size() - s.pos;
  bool had_headers = s.headers_done;
  int running = 0;
  c.multi_perform(s.multi, &running);
  int left = 0;
  while (CURLMsg* m = c.multi_info_read(s.multi, &left)) {
    if (m->msg == CURLMSG_DONE) {
      s.done = true;
      s.result = m->data.result;
    }
  }
  if (s.done) return true;
  if (s.buf.size() - s.pos == before && had_headers == s.headers_done && !s.paused) {
    c.multi_poll(s.multi, nullptr, 0, kPollMs, nullptr);
  }
  Clock::time_point now = Clock::now();
  s.waited += now - start;
  if (now >= s.bounds.deadline) {
    s.done = true;
    s.deadline_passed = true;
    s.result = CURLE_OPERATION_TIMEDOUT;
  } else if (s.waited >= s.bounds.read_timeout) {
    if (s.window_bytes < s.bounds.min_bytes) {
      s.done = true;
      s.stalled = true;
      s.result = CURLE_OPERATION_TIMEDOUT;
    }
    s.waited = {};
    s.window_bytes = 0;
  }
  return true;
}

bool HttpExchange::WaitHeaders() {
  while (!s_->headers_done && !s_->done) Pump();
  return s_->headers_done;
}

long HttpExchange::status() const { return s_->status; }

std::string HttpExchange::Header(std::string_view name) const {
  std::string key = util::AsciiLower(name);
  for (auto it = s_->response_headers.rbegin(); it != s_->response_headers.rend(); ++it) {
    if (it->first == key) return it->second;
  }
  return "";
}

size_t HttpExchange::Read(char* out, size_t n) {
  State& s = *s_;
  while (s.pos == s.buf.size() && !s.done) Pump();
  size_t take = std::min(n, s.buf.size() - s.pos);
  // A byte buffer, not a string: nothing to terminate.
  // NOLINTNEXTLINE(bugprone-not-null-terminated-result)
  std::memcpy(out, s.buf.data() + s.pos, take);
  s.pos += take;
  return take;
}

bool HttpExchange::ReadAll(std::string& out, uint64_t limit) {
  char chunk[65536];
  while (size_t n = Read(chunk, sizeof chunk)) {
    if (out.size() + n > limit) return false;
    out.append(chunk, n);
  }
  return true;
}

long HttpExchange::new_connections() const {
  long n = 0;
  if (s_->easy != nullptr) s_->curl->easy_getinfo(s_->easy, CURLINFO_NUM_CONNECTS, &n);
  return n;
}

TransportError HttpExchange::error() const {
  if (s_->deadline_passed) return TransportError::kDeadline;
  switch (s_->result) {
    case CURLE_OK:
      return TransportError::kNone;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_USE_SSL_FAILED:
      return TransportError::kTls;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return TransportError::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return s_->headers_done ? TransportError::kInterrupted : TransportError::kConnect;
    case CURLE_RECV_ERROR:
      // A TLS 1.3 server rejects a client certificate after the handshake, with an alert.
      return std::strstr(s_->errbuf, "alert") != nullptr ? TransportError::kTls
                                                         : TransportError::kInterrupted;
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return TransportError::kInterrupted;
    default:
      return TransportError::kOther;
  }
}

bool HttpExchange::too_slow() const { return s_->stalled && s_->bounds.min_bytes > kMinStallBytes; }

std::string HttpExchange::error_message() const {
  if (s_->deadline_passed) return "the deadline passed";
  if (s_->stalled)
    return "less than " + std::to_string(s_->bounds.min_bytes) + " bytes in " +
           std::to_string(s_->bounds.read_timeout.count()) + " s of waiting (" +
           (s_->bounds.min_bytes > kMinStallBytes ? "below --min-rate; " : "") +
           "raise the bound with --read-timeout)";
  if (s_->curl == nullptr) return CurlLoadError();
  const CurlLib& c = *s_->curl;
  std::string m = s_->errbuf[0] != '\0' ? s_->errbuf : c.easy_strerror(s_->result);
  m.erase(std::remove(m.begin(), m.end(), '\n'), m.end());
  long os_errno = 0;  // "Couldn't connect" says less than "Connection refused"
  if (c.easy_getinfo(s_->easy, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno != 0) {
    m += " (" + std::string(std::strerror(static_cast<int>(os_errno))) + ")";
  }
  return m;
}

const std::string& HttpExchange::url() const { return s_->url; }

std::string ResolveUrl(const std::string& base, const std::string& location) {
  const CurlLib* lib = Curl();
  if (lib == nullptr) return "";
  const CurlLib& c = *lib;
  CURLU* h = c.url();
  std::string out;
  char* full = nullptr;
  if (c.url_set(h, CURLUPART_URL, base.c_str(), 0) == CURLUE_OK &&
      c.url_set(h, CURLUPART_URL, location.c_str(), 0) == CURLUE_OK &&
      c.url_get(h, CURLUPART_URL, &full, 0) == CURLUE_OK) {
    out = full;
  }
  c.free(full);
  c.url_cleanup(h);
  return out;
}

namespace {

// The scheme, host and port of an absolute URL (lower case, the default port filled in).
bool UrlParts(const std::string& url, std::string& scheme, std::string& host, std::string& port) {
  const CurlLib* lib = Curl();
  if (lib == nullptr) return false;
  const CurlLib& c = *lib;
  CURLU* h = c.url();
  char *s = nullptr, *n = nullptr, *p = nullptr;
  bool ok = c.url_set(h, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
            c.url_get(h, CURLUPART_SCHEME, &s, 0) == CURLUE_OK &&
            c.url_get(h, CURLUPART_HOST, &n, 0) == CURLUE_OK &&
            c.url_get(h, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) == CURLUE_OK;
  if (ok) {
    scheme = util::AsciiLower(s);
    host = util::AsciiLower(n);
    port = p;
  }
  c.free(s);
  c.free(n);
  c.free(p);
  c.url_cleanup(h);
  return ok;
}

}  // namespace

std::string UrlOrigin(const std::string& url) {
  std::string scheme, host, port;
  if (!UrlParts(url, scheme, host, port)) return "";
  return scheme + "://" + host + ":" + port;
}

bool UrlHostPort(const std::string& url, std::string& host, std::string& port) {
  std::string scheme;
  return UrlParts(url, scheme, host, port);
}

std::string UrlEscape(std::string_view s) {
  if (s.empty()) return "";  // curl_easy_escape takes length 0 for "use strlen()"
  const CurlLib* lib = Curl();
  if (lib == nullptr) return "";
  const CurlLib& c = *lib;
  char* e = c.easy_escape(nullptr, s.data(), static_cast<int>(s.size()));
  std::string out = e == nullptr ? "" : e;
  c.free(e);
  return out;
}

}  // namespace imgcheck::image

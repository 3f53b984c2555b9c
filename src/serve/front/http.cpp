#include "serve/front/http.h"

#include <sys/resource.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <map>
#include <optional>

#include "serve/pool.h"
#include "util/error.h"

namespace imgcheck::serve::front {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string HttpRequest::Param(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name)
      return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
  }
  return "";
}

class Connection;

namespace {

constexpr size_t kReadChunk = 4096;
constexpr size_t kDrainBytes = 4 << 20;                // read and dropped after refusing a body
constexpr std::chrono::milliseconds kDrainTime{1000};  // ... for at most this long

struct RouteEntry {
  bool quick = false;
  HttpServer::Handler handler;
};

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpLimits l)
      : limits(l), ssl_ctx(ssl::context::tls_server), acceptor(ioc), poll(ioc) {}

  // Declared before the I/O context, so that connections its queue still holds when it is
  // destroyed find them.
  HttpLimits limits;
  ssl::context ssl_ctx;
  std::map<std::pair<std::string, std::string>, RouteEntry> routes;  ///< (method, path)
  std::function<void(const std::string&, int)> on_answer;
  Counter on_event;
  // I/O thread only.
  std::map<Connection*, std::weak_ptr<Connection>> connections;
  std::map<std::string, size_t> per_peer;
  size_t body_held = 0;
  bool draining = false;
  Clock::time_point hard_stop = Clock::time_point::max();

  asio::io_context ioc{1};
  tcp::acceptor acceptor;
  asio::steady_timer poll;  ///< accept retries; the drain's watch
  std::optional<Pool> pool;

  void Event(std::string_view e) {
    if (on_event) on_event(e);
  }
  void Accept();
  void Admit(tcp::socket socket);
  void WatchDrain();
};

// One client connection, touched only on the I/O thread: handshake, then requests one after
// the other (pipelined ones wait in the buffer), each answer written before the next is read.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& server, tcp::socket socket, std::string peer)
      : server_(server), stream_(std::move(socket), server.ssl_ctx), peer_(std::move(peer)) {}
  ~Connection() {
    Release();
    server_.connections.erase(this);
    if (auto it = server_.per_peer.find(peer_); it != server_.per_peer.end() && --it->second == 0)
      server_.per_peer.erase(it);
  }

  void Start() {
    Lowest().expires_after(server_.limits.handshake);
    stream_.async_handshake(ssl::stream_base::server,
                            [self = shared_from_this()](beast::error_code ec) {
                              if (ec) return self->Timeout(ec);
                              self->WaitRequest();
                            });
  }

  /// Closes the connection unless a request is being handled or answered (the drain).
  void Drain() {
    if (state_ != State::kHandling && state_ != State::kWriting) Close();
  }

 private:
  enum class State { kWaiting, kReading, kHandling, kWriting, kClosing };

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void Timeout(const beast::error_code& ec) {
    if (ec == beast::error::timeout) server_.Event("timeout");
    Close();
  }

  void Close() {
    state_ = State::kClosing;
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  void Release() {
    server_.body_held -= reserved_;
    reserved_ = 0;
  }

  // Keep-alive: waits for a request's first byte under the idle deadline, then gives the whole
  // request line and headers their own.
  void WaitRequest() {
    if (server_.draining) return Close();
    state_ = State::kWaiting;
    if (buffer_.size() > 0) return ReadHeader();
    Lowest().expires_after(server_.limits.idle);
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    state_ = State::kReading;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_.limits.max_header_bytes));
    parser_->body_limit(server_.limits.max_body);
    Lowest().expires_after(server_.limits.headers);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec == http::error::header_limit) return Refuse(431, "request headers too large");
    if (ec == http::error::body_limit) return Refuse(413, "request body too large");
    if (ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message)
      return Refuse(400, "malformed request");
    if (ec) return Timeout(ec);
    const auto& req = parser_->get();
    size_t fields = 0;
    for (auto it = req.begin(); it != req.end(); ++it) ++fields;
    if (fields > server_.limits.max_header_fields)
      return Refuse(431, "more than " + std::to_string(server_.limits.max_header_fields) +
                             " request headers");
    size_t need = 0;
    if (parser_->chunked())
      need = server_.limits.max_body;  // unknown until the last chunk: the most it may be
    else if (auto length = parser_->content_length())
      need = static_cast<size_t>(*length);
    else if (req.method() == http::verb::post || req.method() == http::verb::put ||
             req.method() == http::verb::patch)
      return Refuse(411, "a request body needs Content-Length or chunked framing");
    if (server_.body_held + need > server_.limits.body_budget) {
      server_.Event("body_budget");
      return Refuse(503, "too many request bodies at once; retry");
    }
    server_.body_held += need;
    reserved_ = need;
    // curl and others wait (a second) for this before sending a large body.
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      interim_.emplace(http::status::continue_, req.version());
      Lowest().expires_after(server_.limits.write);
      http::async_write(stream_, *interim_,
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          self->interim_.reset();
                          if (ec) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    Lowest().expires_after(server_.limits.body);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec == http::error::body_limit)
                         return self->Refuse(413, "request body too large");
                       if (ec) return self->Timeout(ec);
                       self->Dispatch();
                     });
  }

  void Dispatch() {
    auto& msg = parser_->get();
    HttpRequest req;
    req.method.assign(msg.method_string().data(), msg.method_string().size());
    std::string_view target(msg.target().data(), msg.target().size());
    size_t q = target.find('?');
    req.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));
    req.body = std::move(msg.body());
    req.peer = peer_;
    keep_alive_ = msg.keep_alive();
    version_ = msg.version();
    parser_.reset();
    auto route = server_.routes.find({req.method, req.path});
    if (route == server_.routes.end()) {
      path_ = "other";
      return Answer({404, "text/plain", "not found\n"});
    }
    path_ = req.path;
    state_ = State::kHandling;
    Lowest().expires_never();
    if (route->second.quick) return Answer(route->second.handler(req));
    const HttpServer::Handler* handler = &route->second.handler;
    auto self = shared_from_this();
    bool queued = server_.pool->Submit([self, handler, req = std::move(req)]() mutable {
      HttpResponse res;
      try {
        res = (*handler)(req);
      } catch (const std::exception& e) {
        res = {500, "text/plain", "internal error\n"};
      }
      req = HttpRequest();  // the body's memory, before the answer leaves
      auto& ioc = self->server_.ioc;
      // The last reference moves to the I/O thread: the connection is destroyed there.
      asio::post(ioc, [self = std::move(self), res = std::move(res)]() mutable {
        self->Answer(std::move(res));
      });
    });
    if (!queued) {
      server_.Event("busy");
      keep_alive_ = false;
      Answer({503, "text/plain", "too many requests at once; retry\n"});
    }
  }

  void Answer(HttpResponse r, bool drain = false) {
    Release();
    state_ = State::kWriting;
    response_.emplace(static_cast<http::status>(r.status), version_ ? version_ : 11);
    response_->set(http::field::content_type, r.content_type);
    if (r.status == 503) response_->set(http::field::retry_after, "1");
    response_->body() = std::move(r.body);
    response_->keep_alive(keep_alive_ && !server_.draining);
    response_->prepare_payload();
    Lowest().expires_after(server_.limits.write);
    http::async_write(stream_, *response_,
                      [self = shared_from_this(), drain](beast::error_code ec, size_t) {
                        auto status = static_cast<int>(self->response_->result_int());
                        bool again = self->response_->keep_alive();
                        self->response_.reset();
                        if (self->server_.on_answer) self->server_.on_answer(self->path_, status);
                        if (ec) return self->Close();
                        if (drain) return self->Drop(0);
                        if (!again) return self->Close();
                        self->WaitRequest();
                      });
  }

  // Answers `status` and closes; what the client was still sending is read and dropped for a
  // moment first, so that the close does not reset the connection before the answer is read.
  void Refuse(int status, const std::string& why) {
    server_.Event(std::to_string(status));
    keep_alive_ = false;
    if (path_.empty()) path_ = "other";
    if (parser_) {
      const auto& msg = parser_->get();
      std::string_view target(msg.target().data(), msg.target().size());
      std::string path(target.substr(0, target.find('?')));
      for (const auto& [key, route] : server_.routes)
        if (key.second == path) path_ = path;
    }
    parser_.reset();
    Answer({status, "text/plain", why + "\n"}, true);
  }

  void Drop(size_t dropped) {
    if (dropped == 0) Lowest().expires_after(kDrainTime);
    if (dropped > kDrainBytes) return Close();
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this(), dropped](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();
                              self->buffer_.commit(n);
                              self->Drop(dropped + n);
                            });
  }

  HttpServer::Impl& server_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  std::optional<http::response<http::empty_body>> interim_;  ///< 100 Continue
  State state_ = State::kWaiting;
  size_t reserved_ = 0;  ///< of the body budget
  bool keep_alive_ = true;
  unsigned version_ = 11;
  std::string path_;
};

void HttpServer::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {  // out of descriptors, most likely: try again in a moment, not in a busy loop
      Event("accept_error");
      poll.expires_after(std::chrono::milliseconds(100));
      poll.async_wait([this](beast::error_code e) {
        if (!e) Accept();
      });
      return;
    }
    Admit(std::move(socket));
    Accept();
  });
}

void HttpServer::Impl::Admit(tcp::socket socket) {
  beast::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return;
  std::string peer = endpoint.address().to_string();
  if (connections.size() >= limits.max_connections) return Event("refused_total");
  if (per_peer[peer] >= limits.max_per_peer) return Event("refused_peer");
  socket.set_option(tcp::no_delay(true), ec);  // no Nagle: an answer is several TLS records
  ++per_peer[peer];
  auto c = std::make_shared<Connection>(*this, std::move(socket), peer);
  connections[c.get()] = c;
  c->Start();
}

void HttpServer::Impl::WatchDrain() {
  if (connections.empty() || Clock::now() >= hard_stop) {
    ioc.stop();
    return;
  }
  poll.expires_after(std::chrono::milliseconds(20));
  poll.async_wait([this](beast::error_code) { WatchDrain(); });
}

HttpServer::HttpServer(HttpLimits limits,
                       const std::function<bool(SSL_CTX*, std::string& error)>& tls)
    : impl_(std::make_shared<Impl>(limits)) {
  SSL_CTX* ctx = impl_->ssl_ctx.native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Idle connections give their read and write buffers back (about 34 KiB each).
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  // A client asking for handshake after handshake on one connection costs the I/O thread a
  // handshake's CPU each time, outside every deadline.
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  std::string error;
  if (!tls(ctx, error)) throw util::Fatal(error.empty() ? "cannot set up TLS" : error);
  impl_->pool.emplace(limits.workers, limits.queue);
  // Each connection holds a descriptor; keep some for Redis, registries and files.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
      nofile.rlim_cur > 128)
    impl_->limits.max_connections =
        std::min<size_t>(impl_->limits.max_connections, nofile.rlim_cur - 128);
}

HttpServer::~HttpServer() {
  impl_->pool.reset();
  impl_->connections.clear();
}

void HttpServer::Route(std::string method, std::string path, bool quick, Handler handler) {
  impl_->routes[{std::move(method), std::move(path)}] = {quick, std::move(handler)};
}

void HttpServer::OnAnswer(std::function<void(const std::string&, int)> f) {
  impl_->on_answer = std::move(f);
}

void HttpServer::OnEvent(Counter f) { impl_->on_event = std::move(f); }

int HttpServer::Listen(const std::string& host, int port) {
  beast::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) throw util::Fatal("--listen: '" + host + "' is not an IP address");
  tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(impl_->limits.backlog, ec);
  if (ec)
    throw util::Fatal("--listen: cannot bind " + host + ":" + std::to_string(port) + ": " +
                      ec.message());
  impl_->Accept();
  return a.local_endpoint().port();
}

void HttpServer::Run() { impl_->ioc.run(); }

void HttpServer::Stop(Clock::time_point hard) {
  asio::post(impl_->ioc, [impl = impl_, hard] {
    if (impl->draining) return;
    impl->draining = true;
    impl->hard_stop = hard;
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->poll.cancel();
    std::vector<std::shared_ptr<Connection>> open;
    for (auto& [raw, weak] : impl->connections)
      if (auto c = weak.lock()) open.push_back(std::move(c));
    for (auto& c : open) c->Drain();
    impl->WatchDrain();
  });
}

size_t HttpServer::Busy() const { return impl_->pool->Busy(); }

}  // namespace imgcheck::serve::front

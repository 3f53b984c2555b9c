#include "serve/server.h"

#include <httplib.h>
#include <openssl/ssl.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/events.h"
#include "serve/gatekeeper.h"
#include "serve/log.h"
#include "serve/tls.h"
#include "util/error.h"

namespace imgcheck::serve {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Time kept back from the deadline for resolving, answering and the network.
constexpr milliseconds kMargin{300};

std::atomic<bool> g_stop{false};
void OnStopSignal(int) { g_stop = true; }

std::pair<std::string, int> SplitListen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon == std::string::npos ? 0 : colon);
  std::string port = colon == std::string::npos ? "" : listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535)
    throw util::Fatal("--listen: '" + listen + "' is not ADDR:PORT");
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  return {host, std::stoi(port)};
}

// The API server appends ?timeout=10s (the webhook's timeoutSeconds) to each call.
milliseconds CallerTimeout(const httplib::Request& req, milliseconds fallback) {
  if (!req.has_param("timeout")) return fallback;
  std::string t = req.get_param_value("timeout");
  size_t digits = t.find_first_not_of("0123456789");
  if (digits == 0 || digits == std::string::npos || digits > 6) return fallback;
  long n = std::stol(t.substr(0, digits));
  std::string unit = t.substr(digits);
  if (unit == "s") return std::min(fallback, milliseconds(n * 1000));
  if (unit == "ms") return std::min(fallback, milliseconds(n));
  if (unit == "m") return std::min(fallback, milliseconds(n * 60000));
  return fallback;
}

// Paths named in the metrics: the endpoints, and "other" (so that scanners of random paths
// cannot grow the label set).
std::string MetricPath(const std::string& path) {
  for (const char* p : {"/v1/admission", "/v1/registry-events", "/v1/gatekeeper", "/healthz",
                        "/readyz", "/metrics"})
    if (path == p) return path;
  return "other";
}

class Handlers {
 public:
  Handlers(const ServerOptions& o, Verdicts& v, Resolver& r, Metrics& m)
      : options_(o), verdicts_(v), resolver_(r), metrics_(m) {}

  // Resolves every image, starts the scans of the unknown ones together, then waits for them
  // within the budget and the request's deadline.
  std::vector<ImageResult> Judge(const std::vector<ImageUse>& uses, const std::string& platform,
                                 Clock::time_point deadline) {
    std::vector<ImageResult> out;
    auto budget_end = std::min(deadline, Clock::now() + options_.scan_budget);
    for (const ImageUse& use : uses) {
      ImageResult r;
      r.use = use;
      auto res = resolver_.Resolve(use.image, platform, deadline);
      if (!res) {
        r.outcome.state = Outcome::State::kFailed;
        r.outcome.error = res.error().message;
      } else {
        r.digest = res->digest;
        r.outcome = verdicts_.Get(r.digest, res->pinned, milliseconds(0));
      }
      out.push_back(std::move(r));
    }
    for (ImageResult& r : out) {
      if (r.outcome.state == Outcome::State::kPending) {
        auto left = std::chrono::duration_cast<milliseconds>(budget_end - Clock::now());
        r.outcome = verdicts_.Wait(r.digest, std::max(milliseconds(0), left));
      }
      const char* what = "error";
      if (r.outcome.state == Outcome::State::kReady)
        what = r.outcome.verdict->Fails(options_.decide.fail_on) ? "deny" : "allow";
      else if (r.outcome.state == Outcome::State::kPending)
        what = "unknown";
      metrics_.Decision(what);
    }
    return out;
  }

  Clock::time_point Deadline(const httplib::Request& req) const {
    return Clock::now() + CallerTimeout(req, options_.request_deadline) - kMargin;
  }

  void Admission(const httplib::Request& req, httplib::Response& res) {
    auto deadline = Deadline(req);
    std::string uid;
    auto parsed = ParseAdmissionReview(req.body, options_.platform, uid);
    AdmissionAnswer answer;
    if (!parsed) {
      answer = Unjudgeable(parsed.error().message, options_.decide.on_error);
      metrics_.Decision("error");
      Log("admission " + (uid.empty() ? "(no uid)" : uid) + ": " + parsed.error().message);
    } else {
      try {
        answer = Decide(Judge(parsed->images, parsed->platform, deadline), options_.decide);
      } catch (const std::exception& e) {  // still an AdmissionReview, per --on-error
        answer = Unjudgeable(std::string("internal error: ") + e.what(), options_.decide.on_error);
        Log("admission " + uid + ": internal error: " + e.what());
      }
      if (!answer.allowed)
        Log("denied " + parsed->kind + " " + parsed->namespace_name + "/" + parsed->name + ": " +
            answer.message);
    }
    res.set_content(AdmissionResponse(uid, answer), "application/json");
  }

  void RegistryEvents(const httplib::Request& req, httplib::Response& res) {
    auto events = ParseRegistryEvents(req.body);
    if (!events) {
      res.status = 400;
      res.set_content(events.error().message + "\n", "text/plain");
      return;
    }
    int queued = 0, skipped = 0;
    for (const PushedManifest& p : *events) {
      auto r = resolver_.Resolve(p.Reference(), options_.platform);
      if (r && verdicts_.Prefetch(r->digest, r->pinned)) {
        ++queued;
      } else {
        ++skipped;
        Log("push of " + p.Reference() +
            " not scanned: " + (r ? "the scan queue is full" : r.error().message));
      }
    }
    nlohmann::json j = {{"queued", queued}, {"skipped", skipped}};
    res.set_content(j.dump(), "application/json");
  }

  void Gatekeeper(const httplib::Request& req, httplib::Response& res) {
    auto deadline = Deadline(req);
    auto keys = ParseProviderRequest(req.body);
    if (!keys) {
      res.set_content(ProviderResponse({}, options_.decide.fail_on, keys.error().message),
                      "application/json");
      return;
    }
    std::vector<ImageUse> uses;
    for (const auto& k : *keys) uses.push_back({k, "key"});
    res.set_content(
        ProviderResponse(Judge(uses, options_.platform, deadline), options_.decide.fail_on),
        "application/json");
  }

 private:
  const ServerOptions& options_;
  Verdicts& verdicts_;
  Resolver& resolver_;
  Metrics& metrics_;
};

}  // namespace

int Serve(const ServerOptions& options, Verdicts& verdicts, Resolver& resolver, Metrics& metrics) {
  auto [host, port] = SplitListen(options.listen);
  CertificateFiles certs(options.tls_cert, options.tls_key, options.cert_check);
  std::string ca_error;
  httplib::SSLServer svr([&](SSL_CTX& ctx) {
    SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
    certs.Attach(&ctx);
    if (options.client_ca.empty()) return true;
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca.c_str());
    if (names == nullptr ||
        SSL_CTX_load_verify_locations(&ctx, options.client_ca.c_str(), nullptr) != 1) {
      ca_error = "--client-ca: " + options.client_ca + " holds no PEM certificate";
      return false;
    }
    SSL_CTX_set_client_CA_list(&ctx, names);
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    return true;
  });
  if (!svr.is_valid()) throw util::Fatal(ca_error.empty() ? "cannot set up TLS" : ca_error);

  int threads = std::max(1, options.http_threads);
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  auto deadline_s = std::max<time_t>(1, options.request_deadline.count() / 1000);
  svr.set_read_timeout(deadline_s, 0);
  svr.set_write_timeout(deadline_s, 0);
  svr.set_keep_alive_max_count(100000);  // a TLS handshake costs more than many answers
  // An answer goes out in several TLS records; with Nagle's algorithm the last waits for the
  // client's delayed ACK (40 ms on Linux), which set every warm request's latency.
  svr.set_tcp_nodelay(true);
  svr.set_payload_max_length(options.max_body);
  svr.set_logger([&](const httplib::Request& req, const httplib::Response& res) {
    metrics.Request(MetricPath(req.path), res.status);
  });
  svr.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        Log("internal error on " + req.path + ": " + what);
        res.status = 500;
        res.set_content("internal error\n", "text/plain");
      });

  Handlers h(options, verdicts, resolver, metrics);
  std::atomic<bool> ready{false};
  svr.Post("/v1/admission", [&](const auto& req, auto& res) { h.Admission(req, res); });
  svr.Post("/v1/registry-events", [&](const auto& req, auto& res) { h.RegistryEvents(req, res); });
  svr.Post("/v1/gatekeeper", [&](const auto& req, auto& res) { h.Gatekeeper(req, res); });
  svr.Get("/healthz", [](const auto&, auto& res) { res.set_content("ok\n", "text/plain"); });
  svr.Get("/readyz", [&](const auto&, auto& res) {
    bool up = ready && verdicts.SharedStoreUp();
    res.status = up ? 200 : 503;
    res.set_content(up ? "ready\n" : "not ready\n", "text/plain");
  });
  svr.Get("/metrics", [&](const auto&, auto& res) {
    res.set_content(metrics.Render(), "text/plain; version=0.0.4");
  });

  if (port == 0) {
    port = svr.bind_to_any_port(host);
    if (port <= 0) throw util::Fatal("--listen: cannot bind " + options.listen);
  } else if (!svr.bind_to_port(host, port)) {
    throw util::Fatal("--listen: cannot bind " + options.listen);
  }
  Log("listening on https://" + host + ":" + std::to_string(port));
  if (!options.ready_file.empty()) {
    std::string tmp = options.ready_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::rename(tmp.c_str(), options.ready_file.c_str());
  }

  g_stop = false;
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGPIPE, SIG_IGN);
  std::thread stopper([&] {
    while (!g_stop) std::this_thread::sleep_for(milliseconds(50));
    ready = false;
    svr.stop();
  });
  ready = true;
  bool ok = svr.listen_after_bind();
  g_stop = true;
  stopper.join();
  verdicts.Stop();
  Log("stopped");
  return ok ? 0 : 2;
}

}  // namespace imgcheck::serve

#include "serve/server.h"

#include <openssl/ssl.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "serve/front/front.h"
#include "serve/log.h"
#include "util/error.h"

namespace imgcheck::serve {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Time kept back from the deadline for resolving, answering and the network.
constexpr milliseconds kMargin{300};
constexpr milliseconds kStoreCheck{2000};  // how often the shared store's health is checked

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
milliseconds CallerTimeout(const front::HttpRequest& req, milliseconds fallback) {
  std::string t = req.Param("timeout");
  size_t digits = t.find_first_not_of("0123456789");
  if (t.empty() || digits == 0 || digits == std::string::npos || digits > 6) return fallback;
  long n = std::stol(t.substr(0, digits));
  std::string unit = t.substr(digits);
  if (unit == "s") return std::min(fallback, milliseconds(n * 1000));
  if (unit == "ms") return std::min(fallback, milliseconds(n));
  if (unit == "m") return std::min(fallback, milliseconds(n * 60000));
  return fallback;
}

front::HttpResponse Json(std::string body) { return {200, "application/json", std::move(body)}; }

class Handlers {
 public:
  Handlers(const ServerOptions& o, fleet::Verdicts& v, fleet::Resolver& r, Metrics& m)
      : options_(o), verdicts_(v), resolver_(r), metrics_(m) {}

  // Resolves every distinct image (the lookups run together on the resolver's pool), starts
  // the scans of the unknown ones together, then waits for them within the budget and the
  // request's deadline.
  std::vector<front::ImageResult> Judge(const std::vector<front::ImageUse>& uses,
                                        const std::string& platform, Clock::time_point deadline) {
    std::map<std::string, size_t> first;  // image -> its first result
    for (const front::ImageUse& use : uses)
      if (first.emplace(use.image, first.size()).second)
        resolver_.Resolve(use.image, platform, Clock::now());  // starts the lookup, waits not
    std::vector<front::ImageResult> distinct(first.size());
    auto budget_end = std::min(deadline, Clock::now() + options_.scan_budget);
    for (const auto& [image, i] : first) {
      front::ImageResult& r = distinct[i];
      auto res = resolver_.Resolve(image, platform, deadline);
      if (!res) {
        r.outcome.state = fleet::Outcome::State::kFailed;
        r.outcome.error = res.error().message;
      } else {
        r.digest = res->digest;
        if (!FromAttestation(r, res->pinned))
          r.outcome = verdicts_.Get(r.digest, res->pinned, milliseconds(0));
      }
    }
    for (front::ImageResult& r : distinct) {
      if (r.outcome.state == fleet::Outcome::State::kPending) {
        auto left = std::chrono::duration_cast<milliseconds>(budget_end - Clock::now());
        r.outcome = verdicts_.Wait(r.digest, std::max(milliseconds(0), left));
      }
      const char* what = "error";
      if (r.outcome.state == fleet::Outcome::State::kReady)
        what = r.outcome.verdict->Fails(options_.decide.fail_on) ? "deny" : "allow";
      else if (r.outcome.state == fleet::Outcome::State::kPending)
        what = "unknown";
      metrics_.Decision(what);
    }
    std::vector<front::ImageResult> out;
    out.reserve(uses.size());
    for (const front::ImageUse& use : uses) {
      out.push_back(distinct[first[use.image]]);
      out.back().use = use;
    }
    return out;
  }

  /// --trust-key: for a digest without a known verdict, the verdict of a valid attestation
  /// (remembered like a scan's); true when one was found. With --verify-attestations-by-scan a
  /// scan still starts in the background.
  bool FromAttestation(front::ImageResult& r, const std::string& pinned) {
    trust::Attestations* a = options_.attestations;
    if (a == nullptr || !a->enabled() || verdicts_.Lookup(r.digest) != nullptr) return false;
    std::shared_ptr<const Verdict> v = a->Find(r.digest, pinned);
    if (!v) return false;
    // Prefetch first: it starts no scan for a digest whose verdict is known.
    if (a->verify_by_scan()) verdicts_.Prefetch(r.digest, pinned);
    verdicts_.Put(r.digest, v);
    r.outcome.state = fleet::Outcome::State::kReady;
    r.outcome.verdict = std::move(v);
    r.outcome.cached = "attestation";
    return true;
  }

  /// An error when `uses` name more distinct images than --max-images.
  util::Expected<void> WithinImageCap(const std::vector<front::ImageUse>& uses) const {
    std::set<std::string_view> distinct;
    for (const front::ImageUse& use : uses) distinct.insert(use.image);
    if (distinct.size() <= options_.max_images) return {};
    return util::MakeError("the request names " + std::to_string(distinct.size()) +
                           " distinct images, more than --max-images " +
                           std::to_string(options_.max_images));
  }

  Clock::time_point Deadline(const front::HttpRequest& req) const {
    return Clock::now() + CallerTimeout(req, options_.request_deadline) - kMargin;
  }

  // Every body gets an AdmissionReview answer (per --on-error when it cannot be judged), never
  // an HTTP error: the API server would apply the webhook's failurePolicy to that instead.
  front::HttpResponse Admission(const front::HttpRequest& req) {
    auto deadline = Deadline(req);
    std::string uid;
    front::AdmissionAnswer answer;
    try {
      auto parsed = front::ParseAdmissionReview(req.body, options_.platform, uid);
      util::Expected<void> capped =
          parsed ? WithinImageCap(parsed->images) : util::Expected<void>(parsed.error());
      if (!capped) {
        answer = front::Unjudgeable(capped.error().message, options_.decide.on_error);
        metrics_.Decision("error");
        Log("admission " + (uid.empty() ? "(no uid)" : uid) + ": " + capped.error().message);
      } else {
        answer = front::Decide(Judge(parsed->images, parsed->platform, deadline), options_.decide);
        if (!answer.allowed)
          Log("denied " + parsed->kind + " " + parsed->namespace_name + "/" + parsed->name + ": " +
              answer.message);
      }
    } catch (const std::exception& e) {
      answer =
          front::Unjudgeable(std::string("internal error: ") + e.what(), options_.decide.on_error);
      metrics_.Decision("error");
      Log("admission " + uid + ": internal error: " + e.what());
    }
    return Json(front::AdmissionResponse(uid, answer));
  }

  // Mutating admission: every image pinned to the digest Judge resolved and judged (the
  // resolutions and verdicts the validating path uses, so that it then judges the pinned digest
  // itself). It denies no image: the validating webhook does; only a request that cannot be
  // pinned at all is answered per --on-error.
  front::HttpResponse Mutation(const front::HttpRequest& req) {
    auto deadline = Deadline(req);
    std::string uid;
    front::AdmissionAnswer answer;
    try {
      auto parsed = front::ParseAdmissionReview(req.body, options_.platform, uid);
      util::Expected<void> capped =
          parsed ? WithinImageCap(parsed->images) : util::Expected<void>(parsed.error());
      if (capped && parsed->images.size() > front::kMaxPins)
        capped = util::MakeError("the request names " + std::to_string(parsed->images.size()) +
                                 " images, more than the " + std::to_string(front::kMaxPins) +
                                 " imgcheck pins in one object");
      if (!capped) {
        answer = front::Unjudgeable(capped.error().message, options_.decide.on_error);
        metrics_.Decision("error");
        Log("mutation " + (uid.empty() ? "(no uid)" : uid) + ": " + capped.error().message);
      } else {
        front::Pinning pinning = front::PinImages(Judge(parsed->images, parsed->platform, deadline),
                                                  options_.decide.fail_on);
        answer.patch = JsonPatch(pinning.pins);
        for (const std::string& why : pinning.unpinned)
          answer.warnings.push_back("imgcheck: not pinned to a digest: " + why);
      }
    } catch (const std::exception& e) {
      answer =
          front::Unjudgeable(std::string("internal error: ") + e.what(), options_.decide.on_error);
      metrics_.Decision("error");
      Log("mutation " + uid + ": internal error: " + e.what());
    }
    return Json(front::AdmissionResponse(uid, answer));
  }

  front::HttpResponse RegistryEvents(const front::HttpRequest& req) {
    auto deadline = Deadline(req);
    auto events = front::ParseRegistryEvents(req.body);
    if (!events) return {400, "text/plain", events.error().message + "\n"};
    int queued = 0, skipped = 0;
    for (const front::PushedManifest& p : *events) {
      auto r = resolver_.Resolve(p.Reference(), options_.platform, deadline);
      if (r && verdicts_.Prefetch(r->digest, r->pinned)) {
        ++queued;
      } else {
        ++skipped;
        Log("push of " + p.Reference() +
            " not scanned: " + (r ? "the scan queue is full" : r.error().message));
      }
    }
    nlohmann::json j = {{"queued", queued}, {"skipped", skipped}};
    return Json(j.dump());
  }

  front::HttpResponse Gatekeeper(const front::HttpRequest& req) {
    auto deadline = Deadline(req);
    auto keys = front::ParseProviderRequest(req.body);
    if (!keys)
      return Json(front::ProviderResponse({}, options_.decide.fail_on, keys.error().message));
    std::vector<front::ImageUse> uses;
    for (const auto& k : *keys) uses.push_back({k, "key"});
    return Json(
        front::ProviderResponse(Judge(uses, options_.platform, deadline), options_.decide.fail_on));
  }

 private:
  const ServerOptions& options_;
  fleet::Verdicts& verdicts_;
  fleet::Resolver& resolver_;
  Metrics& metrics_;
};

}  // namespace

int Serve(const ServerOptions& options, fleet::Verdicts& verdicts, fleet::Resolver& resolver,
          Metrics& metrics) {
  auto [host, port] = SplitListen(options.listen);
  front::CertificateFiles certs(options.tls_cert, options.tls_key, options.cert_check);
  front::HttpServer svr(options.http, [&](SSL_CTX* ctx, std::string& error) {
    certs.Attach(ctx);
    if (options.client_ca.empty()) return true;
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca.c_str());
    if (names == nullptr ||
        SSL_CTX_load_verify_locations(ctx, options.client_ca.c_str(), nullptr) != 1) {
      error = "--client-ca: " + options.client_ca + " holds no PEM certificate";
      return false;
    }
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    return true;
  });
  svr.OnAnswer([&](const std::string& path, int status) { metrics.Request(path, status); });
  svr.OnEvent([&](std::string_view e) { metrics.HttpEvent(e); });

  Handlers h(options, verdicts, resolver, metrics);
  std::atomic<bool> ready{false};
  svr.Route("POST", "/v1/admission", false, [&](const auto& req) { return h.Admission(req); });
  svr.Route("POST", "/v1/mutate", false, [&](const auto& req) { return h.Mutation(req); });
  svr.Route("POST", "/v1/registry-events", false,
            [&](const auto& req) { return h.RegistryEvents(req); });
  svr.Route("POST", "/v1/gatekeeper", false, [&](const auto& req) { return h.Gatekeeper(req); });
  // Probes and metrics are answered on the I/O thread: they never wait behind reviews.
  svr.Route("GET", "/healthz", true, [](const auto&) {
    return front::HttpResponse{200, "text/plain", "ok\n"};
  });
  // Ready means "can decide": listening and not stopping. Without Redis the verdicts in memory
  // and the scans still decide (degraded, see imgcheck_shared_store_up), and a replica taken
  // out of the Service would turn the gate off (failurePolicy: Ignore).
  svr.Route("GET", "/readyz", true, [&](const auto&) {
    return ready ? front::HttpResponse{200, "text/plain", "ready\n"}
                 : front::HttpResponse{503, "text/plain", "not ready\n"};
  });
  svr.Route("GET", "/metrics", true, [&](const auto&) {
    return front::HttpResponse{200, "text/plain; version=0.0.4", metrics.Render()};
  });

  port = svr.Listen(host, port);
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
  Clock::time_point stop_at = Clock::time_point::max();
  std::thread watcher([&] {
    // The shared store's health, checked off the request path: a change is logged once.
    int store = -1;
    auto next_check = Clock::now();
    while (!g_stop) {
      if (Clock::now() >= next_check) {
        verdicts.MeasureQueue();
        bool up = verdicts.SharedStoreUp();
        if (store != static_cast<int>(up) && verdicts.HasSharedStore()) {
          metrics.SharedStoreUp(up);
          if (up && store == 0) Log("the shared store answers again");
          if (!up)
            Log("the shared store does not answer: degraded, deciding from memory and scans");
          store = up;
        }
        next_check = Clock::now() + kStoreCheck;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    ready = false;
    stop_at = Clock::now() + options.shutdown_grace;
    Log("stopping: answering the requests in flight");
    svr.Stop(stop_at - kMargin);
    // Reviews waiting for registries or scans get half the grace; then the lookups and scans
    // are given up and they are answered per --on-error, whatever their own deadlines.
    auto half = Clock::now() + options.shutdown_grace / 2;
    while (svr.Busy() > 0 && Clock::now() < half) std::this_thread::sleep_for(milliseconds(20));
    resolver.Stop();
    if (!verdicts.Stop(stop_at - kMargin)) {
      Log("scans still running at the end of --shutdown-grace: abandoned");
      std::_Exit(0);
    }
  });
  ready = true;
  svr.Run();
  g_stop = true;
  watcher.join();
  while (svr.Busy() > 0 && Clock::now() < stop_at) std::this_thread::sleep_for(milliseconds(20));
  if (svr.Busy() > 0) {
    Log("requests still running at the end of --shutdown-grace: abandoned");
    std::_Exit(0);
  }
  Log("stopped");
  return 0;
}

}  // namespace imgcheck::serve

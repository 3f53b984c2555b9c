// `imgcheck serve`: the scan behind an HTTPS admission hook (src/serve), with scan's registry,
// cache and rule options. The policy is loaded once; its identity keys every verdict.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "attest/keys.h"
#include "cli/commands.h"
#include "cli/rule_args.h"
#include "image/registry.h"
#include "image/registry_auth.h"
#include "scan/scan.h"
#include "serve/fleet/fleet.h"
#include "serve/log.h"
#include "serve/server.h"
#include "serve/trust/trust.h"
#include "util/error.h"
#include "util/file.h"

namespace imgcheck::cli {

namespace {

struct ServeArgs {
  // A server's transfers have a rate floor (issue 33): one registry that drips must not hold
  // workers until --deadline. 16 KiB/s lets a slow link finish.
  ServeArgs() { image.limits.min_rate = 16 << 10; }
  ImageArgs image;  ///< registry and cache options; `reference` unused
  scan::PolicyArgs rules;
  serve::ServerOptions server;
  std::vector<std::string> allow_registry;
  std::string redis;
  std::string redis_password_file;  ///< --redis-password-file: AUTH's password, from a Secret
  std::string verdict_key_file;     ///< --verdict-key-file: seals verdicts in Redis
  bool insecure_unsigned_verdicts = false;
  std::string on_unknown = "allow", on_error = "allow";
  double scan_budget = 8, request_deadline = 10, shutdown_grace = 10;
  int workers = 2;
  int resolve_ttl = 60;
  size_t cache_entries = 10000;
  std::vector<std::string> trust_keys;       ///< --trust-key (h-attest)
  bool verify_attestations_by_scan = false;  ///< --verify-attestations-by-scan (h-attest)
  // The fleet (issue 33).
  int max_deliveries = 5;
  uint64_t facts_max_bytes = uint64_t{1} << 30;  ///< --facts-max-bytes; 0: no facts store
  int registry_share = 0;                        ///< --registry-share; 0: workers - 1
  double sweep_rate = 50;                        ///< --sweep-rate
  std::vector<std::string> crawl;                ///< --crawl HOST[/REPO]
  int crawl_interval = 3600;                     ///< --crawl-interval, seconds
  double crawl_rate = 10;                        ///< --crawl-rate, requests a second
  size_t crawl_page_size = 100;                  ///< --crawl-page-size
};

serve::front::Fallback ParseFallback(const std::string& flag, const std::string& value) {
  if (value == "allow") return serve::front::Fallback::kAllow;
  if (value == "deny") return serve::front::Fallback::kDeny;
  throw util::Fatal(flag + ": '" + value + "' is not allow or deny");
}

// A server reads images from many registries: each --creds must name its HOST. A bare
// USER:PASS is bound to the registry when exactly one --allow-registry names it, and refused
// otherwise (it would be offered to every registry a pod spec names).
void BindServeCreds(std::vector<std::string>& creds, const std::vector<std::string>& allowed) {
  for (std::string& c : creds) {
    if (!image::ParseCredsFlag(c).domain.empty()) continue;
    if (allowed.size() != 1) {
      throw util::Fatal(
          "serve --creds needs HOST=USER:PASS: a bare USER:PASS is accepted only with exactly "
          "one --allow-registry, whose credential it becomes");
    }
    c = allowed[0] + "=" + c;
  }
}

// The policy in use, replaced whole by a reload; scans hold the one they started with.
class PolicyHolder {
 public:
  explicit PolicyHolder(scan::Policy p) : p_(std::make_shared<const scan::Policy>(std::move(p))) {}
  std::shared_ptr<const scan::Policy> Get() const {
    std::lock_guard lock(mu_);
    return p_;
  }
  void Set(std::shared_ptr<const scan::Policy> p) {
    std::lock_guard lock(mu_);
    p_ = std::move(p);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const scan::Policy> p_;
};

// SIGHUP reloads the rule data (after `imgcheck rules update`) and the config: a new policy
// identity, so no verdict of the old one is reused. A policy that fails to load is logged and
// the old one stays. SIGHUP is blocked before any thread starts and taken here with
// sigtimedwait, so no other thread sees it.
class Reloader {
 public:
  Reloader(const scan::PolicyArgs& args, PolicyHolder& policy, serve::fleet::Verdicts& verdicts,
           serve::trust::Attestations& attestations)
      : thread_([this, &args, &policy, &verdicts, &attestations] {
          sigset_t hup;
          sigemptyset(&hup);
          sigaddset(&hup, SIGHUP);
          timespec tick{0, 200L * 1000 * 1000};
          while (!stop_) {
            if (sigtimedwait(&hup, nullptr, &tick) != SIGHUP) continue;
            try {
              auto next = std::make_shared<const scan::Policy>(scan::LoadPolicy(args));
              std::string id = next->ShortIdentity();
              policy.Set(next);
              size_t queued = verdicts.SetIdentity(id);
              attestations.SetIdentity(next->identity);
              serve::Log("SIGHUP: policy reloaded (rules data " + next->knowledge.version().str() +
                         ", identity " + id + "); " + std::to_string(queued) +
                         " digests judged before queued to be judged again");
            } catch (const std::exception& e) {
              serve::Log(std::string("SIGHUP: reload failed, the policy stays: ") + e.what());
            }
          }
        }) {}
  ~Reloader() {
    stop_ = true;
    thread_.join();
  }
  Reloader(const Reloader&) = delete;
  Reloader& operator=(const Reloader&) = delete;

  /// Blocks SIGHUP in the calling thread and every thread it starts later.
  static void BlockHangup() {
    sigset_t hup;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &hup, nullptr);
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The verdict store shared by the replicas (--redis), or null; its sealing key into `vo`, and
// the Redis client under it (for the work queue) into `client`.
std::unique_ptr<serve::fleet::SharedStore> OpenSharedStore(
    const ServeArgs& args, serve::fleet::VerdictOptions& vo,
    std::shared_ptr<serve::fleet::RedisClient>& client) {
  if (!args.verdict_key_file.empty()) {
    auto key = serve::trust::VerdictSeal::ReadKeyFile(args.verdict_key_file);
    if (!key) throw util::Fatal(key.error().message);
    vo.verdict_key = std::move(*key);
  }
  if (args.redis.empty()) return nullptr;
  // Every replica believes what it reads from Redis: unsealed, a verdict anyone with access
  // to Redis writes would admit any image (README "Trust model").
  if (vo.verdict_key.empty() && !args.insecure_unsigned_verdicts) {
    throw util::Fatal(
        "--redis needs --verdict-key-file (a Secret shared by the replicas): without it, "
        "anyone who can write to Redis could make the gate allow any image; pass "
        "--insecure-unsigned-verdicts to accept that");
  }
  if (vo.verdict_key.empty())
    serve::Log("--insecure-unsigned-verdicts: verdicts in Redis are trusted as they are");
  std::string password;
  if (!args.redis_password_file.empty()) {
    auto text = util::ReadFile(args.redis_password_file, 4096);
    if (!text) throw util::Fatal("--redis-password-file: " + text.error().message);
    password = std::move(*text);
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r'))
      password.pop_back();
    if (password.empty()) throw util::Fatal("--redis-password-file is empty");
  }
  auto opened = serve::fleet::RedisClient::Open(args.redis, password);
  if (!opened) throw util::Fatal(opened.error().message);
  client = *opened;
  std::unique_ptr<serve::fleet::SharedStore> shared = serve::fleet::OpenRedisStore(client);
  if (!shared->Ping()) {
    std::string where = args.redis;  // without a password the URL may hold
    if (size_t at = where.rfind('@'); at != std::string::npos)
      where = "redis://" + where.substr(at + 1);
    serve::Log("--redis " + where + " does not answer yet");
  }
  return shared;
}

// --trust-key and --verify-attestations-by-scan (h-attest): the keys, and the scans' registry
// options (credentials bound to their hosts as the scans' are).
serve::trust::AttestationOptions AttestationOptionsOf(const ServeArgs& args,
                                                      const scan::Policy& policy) {
  serve::trust::AttestationOptions a;
  for (const auto& k : args.trust_keys) a.keys.push_back(attest::LoadPublicKey(k));
  a.registry = ToLoadOptions(args.image).registry;
  a.fail_on = policy.fail_on;
  a.verify_by_scan = args.verify_attestations_by_scan;
  return a;
}

// The fleet (issue 33): with --redis the digests to scan wait on Redis Streams that every
// replica reads, so that work outlives the replica that accepted it; without, in memory.
std::unique_ptr<serve::fleet::WorkQueue> WorkQueue(
    const ServeArgs& args, const std::shared_ptr<serve::fleet::RedisClient>& redis,
    const serve::fleet::VerdictOptions& vo, serve::Metrics& metrics) {
  if (!redis) return nullptr;
  serve::fleet::StreamOptions so;
  so.consumer = serve::fleet::ConsumerName();
  so.lease = serve::fleet::LockLease(vo.scan_deadline);
  so.max_deliveries = args.max_deliveries;
  so.local_limit = vo.queue_limit;
  return serve::fleet::MakeStreamQueue(redis, so, metrics);
}

void AddFleetArgs(CLI::App& sub, ServeArgs& args) {
  sub.add_option("--max-deliveries", args.max_deliveries,
                 "with --redis: a digest delivered this often without a verdict goes to the "
                 "dead letters (imgcheck:work:dead)")
      ->capture_default_str()
      ->check(Positive());
  sub.add_option("--registry-share", args.registry_share,
                 "scans of one registry's images at once, so that one that stalls cannot hold "
                 "every worker (default: --workers - 1, at least 1)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--sweep-rate", args.sweep_rate,
                 "scans of a sweep (re-judging after a rules update, a crawl's finds) started a "
                 "second per registry")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub.add_option("--facts-max-bytes", args.facts_max_bytes,
                 "with --redis: bound of the facts store (layer readings and configs every "
                 "replica re-judges from without pulling; least recently used evicted); 0: none")
      ->capture_default_str();
  sub.add_option("--crawl", args.crawl,
                 "HOST[:PORT][/REPO]: walk the registry's catalog (or one repository) and its "
                 "tags at startup and every --crawl-interval, and queue each image no verdict "
                 "judged yet as a sweep (repeatable; HOST must pass --allow-registry)");
  sub.add_option("--crawl-interval", args.crawl_interval, "seconds from one crawl to the next")
      ->capture_default_str()
      ->check(Positive());
  sub.add_option("--crawl-rate", args.crawl_rate, "requests a second a crawl sends a registry")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub.add_option("--crawl-page-size", args.crawl_page_size,
                 "repositories or tags a crawl asks for per listing page (n)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, image::kMaxPageSize));
}

// --crawl: the targets, each on a registry the server may contact, and the crawl's bounds.
serve::fleet::CrawlOptions CrawlOptionsOf(const ServeArgs& args,
                                          const serve::fleet::Resolver& resolver) {
  serve::fleet::CrawlOptions c;
  for (const std::string& flag : args.crawl) {
    auto target = serve::fleet::ParseCrawlTarget(flag);
    if (!target) throw util::Fatal(target.error().message);
    if (!resolver.Allowed(target->host))
      throw util::Fatal("--crawl " + flag + ": registry " + target->host +
                        " is not in --allow-registry");
    c.targets.push_back(*target);
  }
  c.interval = std::chrono::seconds(args.crawl_interval);
  c.rate = args.crawl_rate;
  c.page_size = args.crawl_page_size;
  c.load = ToLoadOptions(args.image);
  c.load.platform = args.image.platform;
  return c;
}

// The scans the workers run: the policy held at their start, the manifest the resolver
// fetched, and with the facts store (issue 33) what a verdict needs kept for every replica, so
// that a new policy re-judges from it with the manifest as the only registry request.
serve::fleet::Scanner ScannerOf(const ServeArgs& args, PolicyHolder& holder,
                                serve::fleet::Resolver& resolver,
                                std::shared_ptr<serve::fleet::FactsStore> facts,
                                serve::Metrics& metrics) {
  return [&args, &holder, &resolver, facts = std::move(facts),
          &metrics](const std::string& reference) {
    ImageArgs image = args.image;
    image.reference = reference;
    std::shared_ptr<const scan::Policy> p = holder.Get();  // kept for the whole scan
    scan::Request request = ScanRequest(image, p->knowledge, scan::Depth::kFindings);
    request.policy = p.get();
    request.load.known_manifest = resolver.TakeManifest(reference);
    std::shared_ptr<serve::fleet::ScanFacts> seen;
    if (facts) {
      seen = std::make_shared<serve::fleet::ScanFacts>(facts);
      request.load.shared_layers = seen;
      request.load.stat_cached = false;
    }
    serve::Verdict v = serve::VerdictOf(scan::Run(request)->report);
    if (seen && seen->FromFactsAlone()) metrics.JudgedWithoutPull();
    return v;
  };
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

int Serve(ServeArgs& args) {
  Reloader::BlockHangup();
  PolicyHolder holder(scan::LoadPolicy(args.rules));
  std::shared_ptr<const scan::Policy> initial = holder.Get();  // the startup settings
  const scan::Policy& policy = *initial;
  serve::ServerOptions& o = args.server;
  o.decide.fail_on = policy.fail_on;
  o.decide.on_unknown = ParseFallback("--on-unknown", args.on_unknown);
  o.decide.on_error = ParseFallback("--on-error", args.on_error);
  o.scan_budget = Millis(args.scan_budget);
  o.request_deadline = Millis(args.request_deadline);
  o.shutdown_grace = Millis(args.shutdown_grace);
  o.platform = args.image.platform;

  serve::fleet::VerdictOptions vo;
  std::shared_ptr<serve::fleet::RedisClient> redis;
  std::unique_ptr<serve::fleet::SharedStore> shared = OpenSharedStore(args, vo, redis);
  if (args.allow_registry.empty())
    serve::Log("no --allow-registry: pod specs may make this server pull from any registry");
  BindServeCreds(args.image.creds, args.allow_registry);
  args.image.allow_registries = args.allow_registry;

  args.image.quiet = true;  // no progress line from a server
  vo.identity = policy.ShortIdentity();
  vo.workers = args.workers;
  vo.registry_share = args.registry_share;
  vo.sweep_rate = args.sweep_rate;
  vo.scan_deadline = std::chrono::seconds(args.image.limits.deadline_s);
  vo.cache_entries = args.cache_entries;
  serve::Metrics metrics;
  // Before the verdicts: their workers' scans take the manifests its lookups fetched.
  serve::fleet::Resolver resolver(ToLoadOptions(args.image), args.allow_registry,
                                  std::chrono::seconds(args.resolve_ttl));
  serve::fleet::CrawlOptions crawl =
      CrawlOptionsOf(args, resolver);  // refused before anything starts
  std::shared_ptr<serve::fleet::FactsStore> facts;
  if (redis && args.facts_max_bytes > 0)
    facts = std::make_shared<serve::fleet::FactsStore>(
        redis, serve::trust::VerdictSeal(vo.verdict_key), args.facts_max_bytes, metrics);
  serve::fleet::Scanner scanner = ScannerOf(args, holder, resolver, facts, metrics);
  serve::fleet::Verdicts verdicts(scanner, vo, std::move(shared), metrics,
                                  WorkQueue(args, redis, vo, metrics));
  serve::trust::Attestations attestations(AttestationOptionsOf(args, policy), metrics);
  attestations.SetIdentity(policy.identity);
  o.attestations = &attestations;
  Reloader reloader(args.rules, holder, verdicts, attestations);
  serve::fleet::Crawler crawler(std::move(crawl), verdicts, metrics);
  return serve::Serve(o, verdicts, resolver, metrics);
}

// --trust-key and --verify-attestations-by-scan (h-attest).
void AddAttestationArgs(CLI::App& sub, ServeArgs& args) {
  sub.add_option("--trust-key", args.trust_keys,
                 "a public key (PEM, as cosign.pub) whose signed attestation of the current "
                 "policy decides an image without a scan (repeatable; docs/admission.md)")
      ->check(CLI::ExistingFile);
  sub.add_flag("--verify-attestations-by-scan", args.verify_attestations_by_scan,
               "scan an image decided by its attestation anyway, in the background");
}

// The HTTP server's bounds: body size, threads, connections, images per request.
void AddHttpArgs(CLI::App& sub, serve::ServerOptions& s) {
  sub.add_option("--max-body", s.http.max_body,
                 "largest request body in bytes, whatever its framing")
      ->capture_default_str();
  sub.add_option("--http-threads", s.http.workers,
                 "requests decided at once (connections cost no thread)")
      ->capture_default_str()
      ->check(Positive());
  sub.add_option("--max-connections", s.http.max_connections, "connections open at once")
      ->capture_default_str()
      ->check(Positive());
  sub.add_option("--max-connections-per-client", s.http.max_per_peer,
                 "connections open at once from one client address")
      ->capture_default_str()
      ->check(Positive());
  sub.add_option("--max-images", s.max_images,
                 "distinct images one request may name (more: answered per --on-error)")
      ->capture_default_str()
      ->check(Positive());
}

// The verdicts shared by the replicas: Redis, its password and the key that seals them.
void AddSharedStoreArgs(CLI::App& sub, ServeArgs& args) {
  sub.add_option("--redis", args.redis,
                 "redis://[:PASSWORD@]HOST[:PORT][/DB]: verdicts shared by replicas");
  sub.add_option("--redis-password-file", args.redis_password_file,
                 "file holding the Redis password (a mounted Secret), instead of the URL's");
  sub.add_option("--verdict-key-file", args.verdict_key_file,
                 "file holding the key (32+ bytes, a mounted Secret) that seals verdicts in "
                 "Redis; needed with --redis");
  sub.add_flag("--insecure-unsigned-verdicts", args.insecure_unsigned_verdicts,
               "use --redis without --verdict-key-file, trusting whatever Redis holds");
}

}  // namespace

Runner DefineServe(CLI::App& sub) {
  auto args = std::make_shared<ServeArgs>();
  ImageArgs& image = args->image;
  // scan's registry and cache options; the images come from requests.
  sub.add_option("--platform", image.platform, "os/arch when a pod's nodeSelector names none")
      ->capture_default_str();
  AddPullArgs(sub, image);
  AddRuleArgs(sub, args->rules);

  serve::ServerOptions& s = args->server;
  sub.add_option("--listen", s.listen, "ADDR:PORT to serve HTTPS on")->capture_default_str();
  sub.add_option("--tls-cert", s.tls_cert,
                 "server certificate (PEM, chain after it); reloaded "
                 "when it changes")
      ->required();
  sub.add_option("--tls-key", s.tls_key, "the certificate's private key (PEM)")->required();
  sub.add_option("--client-ca", s.client_ca, "require client certificates signed by this CA");
  sub.add_option("--allow-registry", args->allow_registry,
                 "HOST[:PORT] images may come from (repeatable; docker.io for Docker Hub); "
                 "default any");
  sub.add_option("--scan-budget", args->scan_budget,
                 "seconds a request waits for the scan of an unknown image")
      ->capture_default_str()
      ->check(NonNegative());
  sub.add_option("--request-deadline", args->request_deadline,
                 "seconds a request may take at most (the API server's ?timeout= too)")
      ->capture_default_str()
      ->check(Positive());
  sub.add_option("--on-unknown", args->on_unknown,
                 "allow|deny an image whose scan did not finish within the budget")
      ->capture_default_str()
      ->check(CLI::IsMember({"allow", "deny"}));
  sub.add_option("--on-error", args->on_error,
                 "allow|deny a request or image that cannot be checked")
      ->capture_default_str()
      ->check(CLI::IsMember({"allow", "deny"}));
  sub.add_option("--workers", args->workers, "scans at once")
      ->capture_default_str()
      ->check(Positive());
  AddSharedStoreArgs(sub, *args);
  AddFleetArgs(sub, *args);
  AddHttpArgs(sub, s);
  sub.add_option("--shutdown-grace", args->shutdown_grace,
                 "seconds from SIGTERM to exit: in-flight requests are answered, scans given up")
      ->capture_default_str()
      ->check(Positive());
  sub.add_option("--resolve-ttl", args->resolve_ttl, "seconds a tag's digest is remembered")
      ->capture_default_str()
      ->check(NonNegative());
  sub.add_option("--verdict-cache", args->cache_entries, "verdicts kept in memory")
      ->capture_default_str();
  AddAttestationArgs(sub, *args);
  sub.add_option("--ready-file", s.ready_file)->group("");  // tests: the port, once listening
  return [args]() -> int { return Serve(*args); };
}

}  // namespace imgcheck::cli

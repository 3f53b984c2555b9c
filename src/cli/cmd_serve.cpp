// `imgcheck serve`: the scan behind an HTTPS admission hook (src/serve), with scan's registry,
// cache and rule options. The policy is loaded once; its identity keys every verdict.
#include <memory>

#include "cli/commands.h"
#include "cli/rule_args.h"
#include "scan/scan.h"
#include "serve/log.h"
#include "serve/server.h"
#include "util/error.h"

namespace imgcheck::cli {

namespace {

struct ServeArgs {
  ImageArgs image;  ///< registry and cache options; `reference` unused
  scan::PolicyArgs rules;
  serve::ServerOptions server;
  std::vector<std::string> allow_registry;
  std::string redis;
  std::string on_unknown = "allow", on_error = "allow";
  double scan_budget = 8, request_deadline = 10;
  int workers = 2;
  int resolve_ttl = 60;
  size_t cache_entries = 10000;
};

serve::Fallback ParseFallback(const std::string& flag, const std::string& value) {
  if (value == "allow") return serve::Fallback::kAllow;
  if (value == "deny") return serve::Fallback::kDeny;
  throw util::Fatal(flag + ": '" + value + "' is not allow or deny");
}

int Serve(ServeArgs& args) {
  scan::Policy policy = scan::LoadPolicy(args.rules);
  serve::ServerOptions& o = args.server;
  o.decide.fail_on = policy.fail_on;
  o.decide.on_unknown = ParseFallback("--on-unknown", args.on_unknown);
  o.decide.on_error = ParseFallback("--on-error", args.on_error);
  o.scan_budget = std::chrono::milliseconds(static_cast<int64_t>(args.scan_budget * 1000));
  o.request_deadline =
      std::chrono::milliseconds(static_cast<int64_t>(args.request_deadline * 1000));
  o.platform = args.image.platform;

  std::unique_ptr<serve::SharedStore> shared;
  if (!args.redis.empty()) {
    auto store = serve::OpenRedis(args.redis);
    if (!store) throw util::Fatal(store.error().message);
    shared = std::move(*store);
    if (!shared->Ping()) serve::Log("--redis " + args.redis + " does not answer yet");
  }
  if (args.allow_registry.empty())
    serve::Log("no --allow-registry: pod specs may make this server pull from any registry");

  args.image.quiet = true;  // no progress line from a server
  serve::VerdictOptions vo;
  vo.identity = policy.ShortIdentity();
  vo.workers = args.workers;
  vo.cache_entries = args.cache_entries;
  serve::Metrics metrics;
  serve::Scanner scanner = [&args, &policy](const std::string& reference) {
    ImageArgs image = args.image;
    image.reference = reference;
    scan::Request request = ScanRequest(image, policy.knowledge, scan::Depth::kFindings);
    request.policy = &policy;
    return serve::VerdictOf(scan::Run(request)->report);
  };
  serve::Verdicts verdicts(scanner, vo, std::move(shared), metrics);
  serve::Resolver resolver(ToLoadOptions(args.image), args.allow_registry,
                           std::chrono::seconds(args.resolve_ttl));
  return serve::Serve(o, verdicts, resolver, metrics);
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
  sub.add_option("--redis", args->redis,
                 "redis://[:PASSWORD@]HOST[:PORT][/DB]: verdicts shared by replicas");
  sub.add_option("--max-body", s.max_body, "largest request body in bytes")->capture_default_str();
  sub.add_option("--http-threads", s.http_threads, "connections served at once")
      ->capture_default_str()
      ->check(Positive());
  sub.add_option("--resolve-ttl", args->resolve_ttl, "seconds a tag's digest is remembered")
      ->capture_default_str()
      ->check(NonNegative());
  sub.add_option("--verdict-cache", args->cache_entries, "verdicts kept in memory")
      ->capture_default_str();
  sub.add_option("--ready-file", s.ready_file)->group("");  // tests: the port, once listening
  return [args]() -> int { return Serve(*args); };
}

}  // namespace imgcheck::cli

// Verdicts: the LRU, single flight, the budget, failures, the queue bound; the resolver's
// allow-list and caches; registry event envelopes; metrics text.
#include "serve/fleet/verdicts.h"

#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

#include "serve/fleet/facts_store.h"
#include "serve/fleet/resolver.h"
#include "serve/front/front.h"
#include "serve/trust/trust.h"
#include "support.h"

using namespace imgcheck::serve;
using namespace imgcheck::serve::fleet;
using namespace imgcheck::serve::front;
using namespace imgcheck::serve::trust;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string Digest(char c) { return "sha256:" + std::string(64, c); }

// An imgcheck-report/1 document for `reference`, with one error finding when `broken`.
std::string Report(const std::string& reference, bool broken) {
  json j = {
      {"schema", "imgcheck-report/1"},
      {"image",
       {{"reference", reference}, {"manifest_digest", reference.substr(reference.find('@') + 1)}}},
      {"findings", json::array()}};
  if (broken)
    j["findings"].push_back({{"rule", "IC020"},
                             {"name", "driver-stub-on-path"},
                             {"severity", "error"},
                             {"message", "the stub is found first"},
                             {"paths", {"/usr/local/cuda/lib64/stubs/libcuda.so.1"}},
                             {"remediation", "drop stubs from LD_LIBRARY_PATH"}});
  return j.dump();
}

// A scanner that counts its calls and can be held until released.
struct FakeScanner {
  std::atomic<int> calls{0};
  std::atomic<bool> release{true};
  std::atomic<bool> fail{false};
  Scanner Get() {
    return [this](const std::string& reference) {
      ++calls;
      for (int i = 0; i < 1000 && !release; ++i) std::this_thread::sleep_for(5ms);
      if (fail) throw imgcheck::util::Fatal("cannot reach reg:5000: connection refused");
      // On a worker thread: no Catch2 assertion here (the first test checks ParseVerdict).
      auto v = ParseVerdict(Report(reference, reference.find("bad") != std::string::npos));
      if (!v) throw std::runtime_error("the fake report does not parse");
      return *v;
    };
  }
};

}  // namespace

TEST_CASE("a verdict parses from the report and knows whether it fails the gate", "[verdicts]") {
  auto v = ParseVerdict(Report("reg/bad@" + Digest('a'), true));
  REQUIRE(v);
  CHECK(v->digest == Digest('a'));
  REQUIRE(v->findings.size() == 1);
  CHECK(v->findings[0].path == "/usr/local/cuda/lib64/stubs/libcuda.so.1");
  CHECK(v->Fails({imgcheck::rules::Severity::kError}));
  CHECK_FALSE(v->Fails({std::nullopt}));
  CHECK(FindingLine(v->findings[0]) ==
        "IC020 driver-stub-on-path in /usr/local/cuda/lib64/stubs/libcuda.so.1; fix: drop stubs "
        "from LD_LIBRARY_PATH");
  CHECK_FALSE(ParseVerdict("{}"));
  CHECK_FALSE(ParseVerdict(R"({"schema":"imgcheck-report/1","image":{}})"));
}

TEST_CASE("a scan's typed verdict is what its stored JSON reads back as", "[verdicts]") {
  imgcheck::report::Report rep;
  rep.image = {"reg/app@" + Digest('b'), "docker", Digest('b'), Digest('c'), "linux/amd64"};
  imgcheck::rules::Finding f;
  f.rule = "IC020";
  f.name = "driver-stub-on-path";
  f.severity = imgcheck::rules::Severity::kWarning;
  f.message = "the stub is found first";
  f.paths = {"/usr/local/cuda/lib64/stubs/libcuda.so.1", "/other"};
  f.remediation = "drop stubs from LD_LIBRARY_PATH";
  rep.findings = {f};
  Verdict typed = VerdictOf(rep);
  auto stored = ParseVerdict(typed.report);
  REQUIRE(stored);
  CHECK(typed.digest == Digest('b'));
  CHECK(stored->digest == typed.digest);
  CHECK(stored->reference == typed.reference);
  REQUIRE(typed.findings.size() == 1);
  REQUIRE(stored->findings.size() == 1);
  CHECK(FindingLine(typed.findings[0]) == FindingLine(stored->findings[0]));
  CHECK(typed.findings[0].severity == stored->findings[0].severity);
  CHECK(typed.findings[0].message == stored->findings[0].message);
  CHECK(typed.Fails({imgcheck::rules::Severity::kWarning}));
  CHECK_FALSE(typed.Fails({imgcheck::rules::Severity::kError}));
}

TEST_CASE("concurrent askers for one unknown digest share one scan", "[verdicts]") {
  FakeScanner fake;
  fake.release = false;
  Metrics metrics;
  Verdicts verdicts(fake.Get(), {}, nullptr, metrics);
  std::string ref = "reg/bad@" + Digest('a');
  std::vector<std::thread> threads;
  std::atomic<int> ready{0}, pending{0};
  threads.reserve(50);
  for (int i = 0; i < 50; ++i)
    threads.emplace_back([&] {
      Outcome o = verdicts.Get(Digest('a'), ref, 5s);
      (o.state == Outcome::State::kReady ? ready : pending)++;
    });
  std::this_thread::sleep_for(50ms);
  fake.release = true;
  for (auto& t : threads) t.join();
  CHECK(fake.calls == 1);
  CHECK(ready == 50);
  Outcome again = verdicts.Get(Digest('a'), ref, 0ms);
  CHECK(again.state == Outcome::State::kReady);
  CHECK(again.cached == "memory");
  CHECK(again.verdict->findings.size() == 1);
  CHECK(fake.calls == 1);
  CHECK_THAT(metrics.Render(),
             Catch::Contains("imgcheck_verdict_cache_hits_total{tier=\"memory\"} 1") &&
                 Catch::Contains("imgcheck_scans_total{result=\"ok\"} 1") &&
                 Catch::Contains("imgcheck_scan_seconds_count 1") &&
                 Catch::Contains("imgcheck_scans_in_flight 0"));
}

TEST_CASE("past the budget the answer is pending and the scan finishes in the background",
          "[verdicts]") {
  FakeScanner fake;
  fake.release = false;
  Metrics metrics;
  Verdicts verdicts(fake.Get(), {}, nullptr, metrics);
  std::string ref = "reg/ok@" + Digest('b');
  CHECK(verdicts.Get(Digest('b'), ref, 20ms).state == Outcome::State::kPending);
  CHECK(verdicts.Wait(Digest('b'), 0ms).state == Outcome::State::kPending);
  fake.release = true;
  Outcome later = verdicts.Wait(Digest('b'), 5s);
  REQUIRE(later.state == Outcome::State::kReady);
  CHECK(later.verdict->findings.empty());
  CHECK(verdicts.Lookup(Digest('b')) != nullptr);
  CHECK(fake.calls == 1);
}

TEST_CASE("a failed scan is answered as failed, and not retried at once", "[verdicts]") {
  FakeScanner fake;
  fake.fail = true;
  Metrics metrics;
  Verdicts verdicts(fake.Get(), {}, nullptr, metrics);
  std::string ref = "reg/x@" + Digest('c');
  Outcome o = verdicts.Get(Digest('c'), ref, 5s);
  REQUIRE(o.state == Outcome::State::kFailed);
  CHECK_THAT(o.error, Catch::Contains("connection refused"));
  CHECK(verdicts.Get(Digest('c'), ref, 5s).state == Outcome::State::kFailed);
  CHECK(fake.calls == 1);
  CHECK_THAT(metrics.Render(), Catch::Contains("imgcheck_scans_total{result=\"failed\"} 1"));
}

TEST_CASE("the LRU keeps the newest verdicts and the queue is bounded", "[verdicts]") {
  FakeScanner fake;
  Metrics metrics;
  VerdictOptions o;
  o.cache_entries = 2;
  Verdicts verdicts(fake.Get(), o, nullptr, metrics);
  for (char c : {'a', 'b', 'c'})
    REQUIRE(verdicts.Get(Digest(c), "r@" + Digest(c), 5s).state == Outcome::State::kReady);
  CHECK(verdicts.Lookup(Digest('a')) == nullptr);
  CHECK(verdicts.Lookup(Digest('c')) != nullptr);

  FakeScanner slow;
  slow.release = false;
  VerdictOptions q;
  q.workers = 1;
  q.queue_limit = 1;
  Verdicts busy(slow.Get(), q, nullptr, metrics);
  CHECK(busy.Prefetch(Digest('d'), "r@" + Digest('d')));
  for (int i = 0; i < 200 && slow.calls == 0; ++i) std::this_thread::sleep_for(5ms);
  CHECK(busy.Prefetch(Digest('e'), "r@" + Digest('e')));        // waits in the queue
  CHECK_FALSE(busy.Prefetch(Digest('f'), "r@" + Digest('f')));  // the queue is full
  Outcome full = busy.Get(Digest('f'), "r@" + Digest('f'), 0ms);
  CHECK(full.state == Outcome::State::kFailed);
  CHECK_THAT(full.error, Catch::Contains("queue is full"));
  slow.release = true;
}

TEST_CASE("a verdict's seal covers the key, the store key and the report's bytes", "[verdicts]") {
  VerdictSeal seal(std::string(32, 'k'));
  std::string name = "imgcheck:verdict:policy:" + Digest('a');
  std::string report = Report("reg/bad@" + Digest('a'), true);
  std::string stored = seal.Seal(name, report);
  std::string out;
  CHECK(seal.Open(name, stored, out) == VerdictSeal::Check::kOk);
  CHECK(out == report);
  CHECK(seal.Open(name, report, out) == VerdictSeal::Check::kUnsigned);
  CHECK(seal.Open("imgcheck:verdict:policy:" + Digest('b'), stored, out) ==
        VerdictSeal::Check::kBadMac);  // moved to another digest
  std::string tampered = stored;
  tampered.replace(tampered.find("\"error\""), 7, "\"notice\"");
  CHECK(seal.Open(name, tampered, out) == VerdictSeal::Check::kBadMac);
  CHECK(VerdictSeal(std::string(32, 'x')).Open(name, stored, out) == VerdictSeal::Check::kOtherKey);
  // Without a key (--insecure-unsigned-verdicts): both read as they are.
  CHECK(VerdictSeal().Open(name, stored, out) == VerdictSeal::Check::kOk);
  CHECK(out == report);
  CHECK(VerdictSeal().Seal(name, report) == report);

  imgcheck::testing::TempDir dir;
  imgcheck::testing::WriteFile(dir.path() / "short", "too short\n");
  CHECK_THAT(VerdictSeal::ReadKeyFile((dir.path() / "short").string()).error().message,
             Catch::Contains("a key must be 32 to 4096 bytes (9 here)"));
  imgcheck::testing::WriteFile(dir.path() / "hex", std::string(64, 'f') + "\n");
  CHECK(VerdictSeal::ReadKeyFile((dir.path() / "hex").string()).value() == std::string(64, 'f'));
}

namespace {

// imgcheck_verdicts_rejected_total{reason="REASON"} as Metrics renders it.
int Rejected(const Metrics& metrics, const std::string& reason) {
  std::string text = metrics.Render();
  std::string name = "imgcheck_verdicts_rejected_total{reason=\"" + reason + "\"} ";
  size_t at = text.find(name);
  return at == std::string::npos ? -1 : std::stoi(text.substr(at + name.size()));
}

// redis-server on a free loopback port with a password, for as long as the object lives.
class RedisServer {
 public:
  explicit RedisServer(const std::filesystem::path& dir)
      : port_(imgcheck::testing::FreeLoopbackPort()), dir_(dir), pidfile_(dir / "redis.pid") {
    Start();
  }
  ~RedisServer() { Stop(); }
  /// Starts it on its port, empty (no persistence: what a restart without a volume gives).
  void Start() {
    auto r = imgcheck::testing::Run(
        "redis-server --port " + std::to_string(port_) +
        " --bind 127.0.0.1 --requirepass test-pass --save '' --appendonly no --daemonize yes "
        "--pidfile " +
        pidfile_.string() + " --dir " + dir_.string() + " --logfile " +
        (dir_ / "redis.log").string());
    REQUIRE(r.status == 0);
    REQUIRE(imgcheck::testing::Eventually([&] {
      return imgcheck::testing::Run("REDISCLI_AUTH=test-pass redis-cli -p " +
                                    std::to_string(port_) + " ping")
                 .output == "PONG\n";
    }));
  }
  /// SIGTERM, and waits until it is gone.
  void Stop() {
    std::string pid =
        std::filesystem::exists(pidfile_) ? imgcheck::testing::ReadFile(pidfile_) : std::string();
    if (pid.empty()) return;
    int n = std::stoi(pid);
    kill(n, SIGTERM);
    CHECK(imgcheck::testing::Eventually([&] { return kill(n, 0) != 0; }));
    std::filesystem::remove(pidfile_);
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  /// A store logged in with the password.
  std::unique_ptr<SharedStore> Store() const {
    auto s = OpenRedis(url(), "test-pass");
    REQUIRE(s);
    return std::move(*s);
  }
  /// What redis-cli prints for `command`, less the newline.
  std::string Cli(const std::string& command) const {
    std::string out = imgcheck::testing::Run("REDISCLI_AUTH=test-pass redis-cli -p " +
                                             std::to_string(port_) + " " + command)
                          .output;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

 private:
  int port_;
  std::filesystem::path dir_, pidfile_;
};

}  // namespace

TEST_CASE("a verdict forged in Redis does not allow a broken image", "[verdicts][redis]") {
  if (!imgcheck::testing::HaveProgram("redis-server"))
    return imgcheck::testing::Skip("redis-server not installed");
  imgcheck::testing::TempDir dir;
  RedisServer redis(dir.path());
  auto store = [&] { return redis.Store(); };
  CHECK_FALSE(OpenRedis(redis.url())->get()->Ping());  // the password is needed
  VerdictOptions o;
  o.identity = "policy1";
  o.verdict_key = std::string(40, 's');
  std::string bad = "reg/bad@" + Digest('a');
  std::string key = "imgcheck:verdict:policy1:" + Digest('a');

  // What an attacker with access to Redis writes: the report with no findings, unsigned, or
  // signed with a key of their own.
  auto forged = json::parse(Report(bad, false)).dump();
  auto attacker = store();
  for (const std::string& value : {forged, VerdictSeal(std::string(32, 'e')).Seal(key, forged)}) {
    attacker->Put(key, value, 60s);
    FakeScanner fake;
    Metrics metrics;
    Verdicts verdicts(fake.Get(), o, store(), metrics);
    Outcome out = verdicts.Get(Digest('a'), bad, 10s);
    REQUIRE(out.state == Outcome::State::kReady);
    CHECK(out.cached.empty());  // scanned here, not taken from Redis
    CHECK(out.verdict->Fails({imgcheck::rules::Severity::kError}));
    CHECK(fake.calls == 1);
    CHECK(Rejected(metrics, value == forged ? "unsigned" : "other_key") >= 1);
    // The scan overwrote the forgery with a sealed verdict, which another replica trusts.
    FakeScanner other_fake;
    Metrics other_metrics;
    Verdicts other(other_fake.Get(), o, store(), other_metrics);
    Outcome again = other.Get(Digest('a'), bad, 10s);
    REQUIRE(again.state == Outcome::State::kReady);
    CHECK(again.cached == "redis");
    CHECK(again.verdict->Fails({imgcheck::rules::Severity::kError}));
    CHECK(other_fake.calls == 0);
  }
  // A genuine verdict of a clean image copied to the broken image's key fails the check too.
  std::string clean = "reg/ok@" + Digest('c');
  {
    FakeScanner fake;
    Metrics metrics;
    Verdicts verdicts(fake.Get(), o, store(), metrics);
    REQUIRE(verdicts.Get(Digest('c'), clean, 10s).state == Outcome::State::kReady);
  }
  auto copied = attacker->Get("imgcheck:verdict:policy1:" + Digest('c'));
  REQUIRE(copied);
  attacker->Put(key, *copied, 60s);
  FakeScanner fake;
  Metrics metrics;
  Verdicts verdicts(fake.Get(), o, store(), metrics);
  Outcome out = verdicts.Get(Digest('a'), bad, 10s);
  REQUIRE(out.state == Outcome::State::kReady);
  CHECK(out.verdict->Fails({imgcheck::rules::Severity::kError}));
  CHECK(fake.calls == 1);
  CHECK(Rejected(metrics, "bad_mac") >= 1);
}

TEST_CASE("a scan's lock is leased for a share of --deadline and lapses soon after its holder",
          "[verdicts][redis]") {
  CHECK(LockLease(3600s) == 10s);  // the default --deadline
  CHECK(LockLease(1800s) == 5s);
  CHECK(LockLease(36000s) == 10s);
  CHECK(LockLease(60s) == 1s);
  if (!imgcheck::testing::HaveProgram("redis-server"))
    return imgcheck::testing::Skip("redis-server not installed");
  imgcheck::testing::TempDir dir;
  RedisServer redis(dir.path());
  auto store = [&] { return redis.Store(); };
  VerdictOptions o;
  o.identity = "policy1";
  o.verdict_key = std::string(40, 's');
  o.poll = 20ms;
  auto lock_of = [](char c) { return "imgcheck:verdict:policy1:" + Digest(c) + ":lock"; };
  auto pttl = [&](char c) { return std::stoll(redis.Cli("pttl " + lock_of(c))); };
  Metrics metrics;
  // A replica whose scan of image `c` (held by `scans`) has begun and holds the lock.
  auto scanning = [&](char c, FakeScanner& scans) {
    scans.release = false;
    auto v = std::make_unique<Verdicts>(scans.Get(), o, store(), metrics);
    CHECK(v->Get(Digest(c), std::string("reg/app@") + Digest(c), 0ms).state ==
          Outcome::State::kPending);
    REQUIRE(imgcheck::testing::Eventually([&] { return pttl(c) > 0; }));
    return v;
  };

  // A replica that died holding a lock (what a SIGKILL leaves: nobody renews it): another
  // replica waits for it, then scans once it lapses, a lease (2 s for --deadline 720) later.
  o.scan_deadline = 720s;
  std::string image = "reg/ok@" + Digest('a');
  REQUIRE(store()->Lock(lock_of('a'), LockLease(o.scan_deadline)));
  auto locked_at = std::chrono::steady_clock::now();
  FakeScanner survivor_scans;
  Verdicts survivor(survivor_scans.Get(), o, store(), metrics);
  CHECK(survivor.Get(Digest('a'), image, 0ms).state == Outcome::State::kPending);
  std::this_thread::sleep_for(500ms);
  CHECK(survivor_scans.calls == 0);  // waiting on the lock
  Outcome taken = survivor.Wait(Digest('a'), 10s);
  CHECK(taken.state == Outcome::State::kReady);
  CHECK(survivor_scans.calls == 1);
  CHECK(std::chrono::steady_clock::now() - locked_at < 6s);
  // Released after the scan, once its verdict is stored (a waiter here has it a moment before).
  CHECK(imgcheck::testing::Eventually([&] { return redis.Cli("exists " + lock_of('a')) == "0"; }));

  // A live replica's scan that outlasts several leases (1 s for --deadline 360) keeps its lock,
  // renewed: the other replica never scans, and takes the verdict from the store.
  o.scan_deadline = 360s;
  FakeScanner holder_scans;
  auto holder = scanning('b', holder_scans);
  FakeScanner other_scans;
  Verdicts other(other_scans.Get(), o, store(), metrics);
  CHECK(other.Get(Digest('b'), "reg/app@" + Digest('b'), 0ms).state == Outcome::State::kPending);
  for (int i = 0; i < 5; ++i) {  // 2.5 s: two and a half leases
    std::this_thread::sleep_for(500ms);
    long long left = pttl('b');
    CHECK(left > 0);
    CHECK(left <= 1000);
  }
  CHECK(other_scans.calls == 0);
  holder_scans.release = true;
  Outcome shared = other.Wait(Digest('b'), 10s);
  REQUIRE(shared.state == Outcome::State::kReady);
  CHECK(shared.cached == "redis");
  CHECK(other_scans.calls == 0);
  CHECK(holder_scans.calls == 1);

  // A scan stuck past its deadline (2 s here) holds the others off no longer: renewal stops,
  // and the lock lapses a lease later.
  o.scan_deadline = 2s;
  FakeScanner stuck_scans;
  auto stuck_holder = scanning('c', stuck_scans);
  auto started = std::chrono::steady_clock::now();
  FakeScanner next_scans;
  Verdicts next(next_scans.Get(), o, store(), metrics);
  CHECK(next.Get(Digest('c'), "reg/app@" + Digest('c'), 0ms).state == Outcome::State::kPending);
  CHECK(next.Wait(Digest('c'), 10s).state == Outcome::State::kReady);
  CHECK(next_scans.calls == 1);
  CHECK(stuck_scans.calls == 1);
  CHECK(std::chrono::steady_clock::now() - started < 4500ms);  // before the stuck scan ends
  stuck_scans.release = true;

  // A scan abandoned at shutdown gives its lock back at once.
  o.scan_deadline = 3600s;
  FakeScanner abandoned_scans;
  {
    auto abandoning = scanning('d', abandoned_scans);
    CHECK_FALSE(abandoning->Stop(std::chrono::steady_clock::now() + 200ms));
    CHECK(redis.Cli("exists " + lock_of('d')) == "0");
    abandoned_scans.release = true;  // the destructor waits for the abandoned worker
  }
}

// What a registry answers for a manifest of digest `digest` (its bytes do not matter here).
imgcheck::image::KnownManifest Manifest(const std::string& digest) {
  return {digest, "application/vnd.oci.image.manifest.v1+json", "{}"};
}

TEST_CASE("the resolver keeps to the allow-list and caches what it resolved", "[resolver]") {
  std::atomic<int> fetches{0};
  ManifestResolver fetch = [&](const std::string& ref, const imgcheck::image::LoadOptions& o) {
    ++fetches;
    if (ref.find("missing") != std::string::npos) throw imgcheck::util::Fatal("manifest unknown");
    return Manifest(o.platform == "linux/arm64" ? Digest('9') : Digest('1'));
  };
  Resolver r({}, {"reg:5000", "docker.io"}, 0s, fetch);
  auto a = r.Resolve("reg:5000/team/app:1", "linux/amd64");
  REQUIRE(a);
  CHECK(a->digest == Digest('1'));
  CHECK(a->pinned == "docker://reg:5000/team/app@" + Digest('1'));
  // The manifest the lookup fetched goes to the scan of what it pinned, once.
  std::shared_ptr<const imgcheck::image::KnownManifest> kept = r.TakeManifest(a->pinned);
  REQUIRE(kept);
  CHECK(kept->digest == Digest('1'));
  CHECK(r.TakeManifest(a->pinned) == nullptr);
  CHECK(r.Resolve("reg:5000/team/app:1", "linux/arm64")->digest == Digest('9'));
  CHECK(r.Resolve("ubuntu", "linux/amd64"));  // docker.io/library/ubuntu:latest
  auto denied = r.Resolve("evil.example/x:1", "linux/amd64");
  REQUIRE_FALSE(denied);
  CHECK(denied.error().message ==
        "image 'evil.example/x:1': registry evil.example is not in --allow-registry");
  CHECK_FALSE(r.Resolve("reg:5000/Bad Name", "linux/amd64"));
  auto missing = r.Resolve("reg:5000/missing:1", "linux/amd64");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error().message, Catch::EndsWith("manifest unknown"));
  int before = fetches;
  r.Resolve("reg:5000/team/app:1", "linux/amd64");  // tag TTL 0: asked again
  CHECK(fetches == before + 1);
  std::string pinned = "reg:5000/team/app@" + Digest('7');
  r.Resolve(pinned, "linux/amd64");
  r.Resolve(pinned, "linux/amd64");  // a digest never moves: asked once
  CHECK(fetches == before + 2);

  // Many askers for a new tag at once: one registry round trip between them.
  std::atomic<int> slow_fetches{0};
  Resolver slow({}, {}, 60s, [&](const std::string&, const imgcheck::image::LoadOptions&) {
    ++slow_fetches;
    std::this_thread::sleep_for(100ms);
    return Manifest(Digest('5'));
  });
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  threads.reserve(20);
  for (int i = 0; i < 20; ++i)
    threads.emplace_back([&] {
      auto x = slow.Resolve("reg:5000/new:1", "linux/amd64");
      if (x && x->digest == Digest('5')) ++right;
    });
  for (auto& t : threads) t.join();
  CHECK(right == 20);
  CHECK(slow_fetches == 1);

  // Shutdown: a Resolve waiting on a registry that does not answer ends at once, whatever its
  // deadline (the lookup itself goes on to its own).
  std::atomic<bool> answer{false};
  Resolver silent({}, {}, 60s, [&](const std::string&, const imgcheck::image::LoadOptions&) {
    for (int i = 0; i < 2000 && !answer; ++i) std::this_thread::sleep_for(5ms);
    return Manifest(Digest('6'));
  });
  std::optional<imgcheck::util::Expected<Resolved>> waited;
  std::thread waiter([&] {
    waited =
        silent.Resolve("reg:5000/silent:1", "linux/amd64", std::chrono::steady_clock::now() + 30s);
  });
  std::this_thread::sleep_for(100ms);
  auto stopped = std::chrono::steady_clock::now();
  silent.Stop();
  waiter.join();
  CHECK(std::chrono::steady_clock::now() - stopped < 2s);
  REQUIRE(waited);
  REQUIRE_FALSE(*waited);
  CHECK_THAT(waited->error().message, Catch::Contains("the server is shutting down"));
  answer = true;  // the pool's thread, joined when `silent` goes
}

TEST_CASE("registry notification envelopes yield the pushed manifests", "[events]") {
  // As docker/distribution's notifications send them: blob and manifest events, pushes and pulls.
  json envelope = {
      {"events",
       {{{"id", "1"},
         {"timestamp", "2026-11-23T05:00:00Z"},
         {"action", "push"},
         {"target",
          {{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"},
           {"digest", Digest('l')},
           {"repository", "team/app"}}},
         {"request", {{"host", "127.0.0.1:5000"}}}},
        {{"id", "2"},
         {"action", "push"},
         {"target",
          {{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
           {"digest", Digest('m')},
           {"repository", "team/app"},
           {"tag", "1"},
           {"url", "http://127.0.0.1:5000/v2/team/app/manifests/" + Digest('m')}}},
         {"request", {{"host", "127.0.0.1:5000"}, {"method", "PUT"}}}},
        {{"id", "3"},
         {"action", "pull"},
         {"target",
          {{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
           {"digest", Digest('m')},
           {"repository", "team/app"}}}},
        {{"id", "4"},
         {"action", "push"},
         {"target",
          {{"mediaType", "application/vnd.docker.distribution.manifest.list.v2+json"},
           {"digest", Digest('i')},
           {"repository", "team/multi"},
           {"url", "http://reg.internal:5000/v2/team/multi/manifests/" + Digest('i')}}}}}}};
  auto pushed = ParseRegistryEvents(envelope.dump());
  REQUIRE(pushed);
  REQUIRE(pushed->size() == 2);
  CHECK((*pushed)[0].Reference() == "127.0.0.1:5000/team/app@" + Digest('m'));
  CHECK((*pushed)[0].tag == "1");
  CHECK((*pushed)[1].Reference() == "reg.internal:5000/team/multi@" + Digest('i'));
  CHECK_FALSE(ParseRegistryEvents("{\"events\": 3}"));
  CHECK_FALSE(ParseRegistryEvents("nope"));
}

TEST_CASE("the work queue in memory takes admission misses before sweeps, sweeps when asked",
          "[work]") {
  auto q = MakeLocalQueue(1);
  CHECK(q->Add(Digest('a'), "r@" + Digest('a'), Priority::kSweep));
  CHECK(q->Add(Digest('b'), "r@" + Digest('b'), Priority::kSweep));  // bounded by what is known
  CHECK(q->Add(Digest('d'), "r@" + Digest('d'), Priority::kNow));
  CHECK_FALSE(q->Add(Digest('c'), "r@" + Digest('c'), Priority::kNow));  // full
  CHECK(q->Depth(Priority::kSweep).entries == 2);
  auto first = q->Take(0ms, true);
  REQUIRE(first);
  CHECK(first->digest == Digest('d'));
  CHECK_FALSE(q->Take(10ms, false));  // only sweeps wait
  auto sweep = q->Take(0ms, true);
  REQUIRE(sweep);
  CHECK(sweep->digest == Digest('a'));
  CHECK(sweep->priority == Priority::kSweep);
  q->Stop();
  CHECK_FALSE(q->Take(0ms, true));
  CHECK_FALSE(q->Add(Digest('e'), "r@" + Digest('e'), Priority::kNow));
}

TEST_CASE(
    "work on Redis Streams: reclaimed from a dead replica after the lease, dead-lettered "
    "after N deliveries, forged entries dropped",
    "[work][redis]") {
  if (!imgcheck::testing::HaveProgram("redis-server"))
    return imgcheck::testing::Skip("redis-server not installed");
  imgcheck::testing::TempDir dir;
  RedisServer redis(dir.path());
  auto client = [&] {
    auto c = RedisClient::Open(redis.url(), "test-pass");
    REQUIRE(c);
    return *c;
  };
  Metrics ma, mb;
  StreamOptions oa;
  oa.consumer = "a";
  oa.lease = 400ms;
  oa.poll = 20ms;
  oa.max_deliveries = 3;
  StreamOptions ob = oa;
  ob.consumer = "b";
  auto a = MakeStreamQueue(client(), oa, ma);
  auto b = MakeStreamQueue(client(), ob, mb);
  std::string ref = "docker://reg/app@" + Digest('a');

  // The replica that accepted an admission miss holds it at once; the other sees nothing.
  REQUIRE(a->Add(Digest('a'), ref, Priority::kNow));
  CHECK_FALSE(b->Take(0ms, true));
  auto held = a->Take(0ms, false);
  REQUIRE(held);
  CHECK(held->digest == Digest('a'));
  CHECK(held->reference == ref);
  CHECK_FALSE(held->id.empty());
  // While a touches it, it stays a's past the lease.
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(150ms);
    CHECK(a->Touch(*held));
  }
  CHECK_FALSE(b->Take(0ms, true));
  // a dies (no Done, no more touches): b takes it over once it idled for the lease.
  a.reset();
  auto start = std::chrono::steady_clock::now();
  std::optional<WorkItem> taken;
  REQUIRE(
      imgcheck::testing::Eventually([&] { return (taken = b->Take(10ms, false)).has_value(); }));
  CHECK(std::chrono::steady_clock::now() - start < 1500ms);
  CHECK(taken->id == held->id);
  CHECK_THAT(mb.Render(), Catch::Contains("imgcheck_work_reclaimed_total{priority=\"now\"} 1"));
  b->Done(*taken);
  CHECK(redis.Cli("xlen imgcheck:work:now") == "0");
  std::string pending = redis.Cli("xpending imgcheck:work:now imgcheck");
  CHECK(pending.substr(0, pending.find('\n')) == "0");

  // A digest whose scan keeps failing: delivered max_deliveries times, then dead-lettered with
  // its last error and that count (--max-deliveries 3: three deliveries, "3" in the entry).
  std::string broken = "docker://reg/broken@" + Digest('b');
  REQUIRE(b->Add(Digest('b'), broken, Priority::kNow));
  int deliveries = 0;
  REQUIRE(imgcheck::testing::Eventually([&] {
    if (auto item = b->Take(10ms, false)) {
      ++deliveries;
      b->Failed(*item,
                "cannot reach reg: connection refused (try " + std::to_string(deliveries) + ")");
    }
    return redis.Cli("xlen imgcheck:work:dead") == "1";
  }));
  CHECK(deliveries == 3);
  std::string dead = redis.Cli("xrange imgcheck:work:dead - +");
  CHECK_THAT(dead, Catch::Contains(broken) && Catch::Contains("(try 3)") &&
                       Catch::Contains("\nn\n3\n") && !Catch::Contains("\nn\n4\n"));
  // The retries of a scan that failed are no dead replica: the reclaim of a's entry only.
  CHECK_THAT(mb.Render(), Catch::Contains("imgcheck_work_reclaimed_total{priority=\"now\"} 1"));
  CHECK(redis.Cli("xlen imgcheck:work:now") == "0");
  CHECK_THAT(mb.Render(), Catch::Contains("imgcheck_work_dead_letters_total{priority=\"now\"} 1"));

  // Entries written by someone else: a reference that does not pin its digest, a digest that
  // is none, an extra field, a huge field. Dropped and counted, never handed out.
  for (const std::string& fields :
       {"d " + Digest('c') + " r docker://reg/evil@" + Digest('d'),
        std::string("d sha256:zz r docker://reg/x@sha256:zz"),
        "d " + Digest('c') + " r docker://reg/x@" + Digest('c') + " x 1",
        "d " + Digest('c') + " r docker://" + std::string(5000, 'r') + "@" + Digest('c'),
        "d " + Digest('c') + " r oci:/etc@" + Digest('c')})
    redis.Cli("xadd imgcheck:work:sweep '*' " + fields);
  CHECK_FALSE(b->Take(0ms, false));  // sweeps not asked for
  for (int i = 0; i < 7; ++i) CHECK_FALSE(b->Take(0ms, true));
  CHECK_THAT(mb.Render(), Catch::Contains("imgcheck_work_invalid_total 5"));
  CHECK(redis.Cli("xlen imgcheck:work:sweep") == "0");

  // Admission misses before sweeps; the streams are bounded.
  REQUIRE(b->Add(Digest('e'), "docker://r@" + Digest('e'), Priority::kSweep));
  StreamOptions oc = ob;
  oc.consumer = "c";
  oc.limit = 1;
  auto c = MakeStreamQueue(client(), oc, mb);
  CHECK_FALSE(c->Add(Digest('6'), "docker://r@" + Digest('6'), Priority::kSweep));
  REQUIRE(c->Add(Digest('5'), "docker://r@" + Digest('5'), Priority::kNow));
  auto next = b->Take(0ms, true);  // c holds g: b gets the sweep
  REQUIRE(next);
  CHECK(next->digest == Digest('e'));
  auto own = c->Take(0ms, true);
  REQUIRE(own);
  CHECK(own->digest == Digest('5'));
  b->Done(*next);
  c->Done(*own);

  // Put back (its registry had its share of the workers): a new entry at the end, with the
  // sweep's policy identity, and no delivery counted, however often.
  redis.Cli("xadd imgcheck:work:sweep '*' d " + Digest('f') + " r docker://reg/f@" + Digest('f') +
            " i 0123abcd");
  for (int i = 0; i < 5; ++i) {
    auto item = b->Take(0ms, true);
    REQUIRE(item);
    CHECK(item->identity == "0123abcd");
    CHECK(b->Requeue(*item));
    CHECK(redis.Cli("xlen imgcheck:work:sweep") == "1");
  }
  std::string waiting = redis.Cli("xpending imgcheck:work:sweep imgcheck");
  CHECK(waiting.substr(0, waiting.find('\n')) == "0");  // none held: it waits as new
  CHECK(redis.Cli("xlen imgcheck:work:dead") == "1");   // the earlier one only
  auto last = b->Take(0ms, true);
  REQUIRE(last);
  b->Done(*last);
}

namespace {

// Digest number `i` (distinct for i < 65536).
std::string DigestN(int i) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string d = "sha256:" + std::string(60, '0');
  for (int shift = 12; shift >= 0; shift -= 4) d += kHex[(i >> shift) & 15];
  return d;
}

// The value of series "name{labels}" in Metrics::Render's text; -1 when absent.
long long Counter(const Metrics& metrics, const std::string& series) {
  std::string text = metrics.Render();
  size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + series.size() + 2));
}

}  // namespace

TEST_CASE(
    "a reload hands back at once the work a replica refused, and reclaims count only the silent",
    "[work][redis]") {
  if (!imgcheck::testing::HaveProgram("redis-server"))
    return imgcheck::testing::Skip("redis-server not installed");
  imgcheck::testing::TempDir dir;
  RedisServer redis(dir.path());
  auto client = [&] {
    auto c = RedisClient::Open(redis.url(), "test-pass");
    REQUIRE(c);
    return *c;
  };
  const std::string handed = "imgcheck_work_handed_back_total{priority=\"sweep\"}";
  const std::string reclaimed = "imgcheck_work_reclaimed_total{priority=\"sweep\"}";

  SECTION("two consumers: what one refused the other takes at once after its reload") {
    Metrics ma, mb;
    StreamOptions oa;
    oa.consumer = "a";
    oa.lease = 10s;  // no take below may wait for it
    oa.poll = 20ms;
    StreamOptions ob = oa;
    ob.consumer = "b";
    auto a = MakeStreamQueue(client(), oa, ma);
    auto b = MakeStreamQueue(client(), ob, mb);
    // a reloaded to policy 00000002 and queued its sweep; b, under 00000001 still, meets it.
    for (char c : {'a', 'b'})
      redis.Cli("xadd imgcheck:work:sweep '*' d " + Digest(c) + " r docker://reg/x@" + Digest(c) +
                " i 00000002");
    const std::string why = "queued for policy 00000002, met a replica under 00000001";
    auto start = std::chrono::steady_clock::now();
    // The first meeting of each: handed back at once, a new entry at the end, nothing held.
    for (int i = 0; i < 2; ++i) {
      auto item = b->Take(0ms, true);
      REQUIRE(item);
      CHECK(item->identity == "00000002");
      b->Refused(*item, why);
    }
    CHECK(Counter(mb, handed) == 2);
    std::string pending = redis.Cli("xpending imgcheck:work:sweep imgcheck");
    CHECK(pending.substr(0, pending.find('\n')) == "0");
    // Met again: kept by b as a failure would be, so that no two replicas pass one entry to and
    // fro for a policy neither runs.
    std::vector<std::string> kept;
    for (int i = 0; i < 2; ++i) {
      auto item = b->Take(0ms, true);
      REQUIRE(item);
      kept.push_back(item->id);
      b->Refused(*item, why);
    }
    CHECK(Counter(mb, handed) == 2);
    CHECK_FALSE(a->Take(0ms, true));  // b holds both, for a lease
    // b reloads: both handed back; a takes them at once, as new entries.
    CHECK(b->HandBack() == 2);
    CHECK(b->HandBack() == 0);  // nothing held any more
    CHECK(Counter(mb, handed) == 4);
    std::set<std::string> digests;
    for (int i = 0; i < 2; ++i) {
      auto item = a->Take(0ms, true);
      REQUIRE(item);
      CHECK(std::find(kept.begin(), kept.end(), item->id) == kept.end());
      digests.insert(item->digest);
      a->Done(*item);
    }
    CHECK(digests == std::set<std::string>{Digest('a'), Digest('b')});
    CHECK(std::chrono::steady_clock::now() - start < 5s);  // no lease of 10 s waited
    CHECK(Counter(ma, reclaimed) == 0);
    CHECK(Counter(mb, reclaimed) == 0);
    CHECK(redis.Cli("xlen imgcheck:work:sweep") == "0");
    CHECK(redis.Cli("xlen imgcheck:work:dead") == "0");
  }

  SECTION("a rolling reload of two replicas: the sweep judged without a lease, no reclaim") {
    Metrics ma, mb;
    StreamOptions so;
    so.lease = LockLease(3600s);  // the default --deadline's: 10 s
    so.poll = 20ms;
    VerdictOptions o;
    o.identity = "00000001";
    o.verdict_key = std::string(40, 's');
    o.poll = 20ms;
    o.sweep_rate = 1000;
    FakeScanner fa, fb;
    so.consumer = "a";
    Verdicts a(fa.Get(), o, redis.Store(), ma, MakeStreamQueue(client(), so, ma));
    so.consumer = "b";
    Verdicts b(fb.Get(), o, redis.Store(), mb, MakeStreamQueue(client(), so, mb));
    constexpr int kImages = 30;
    for (int i = 0; i < kImages; ++i)
      REQUIRE(a.Get(DigestN(i), "docker://reg/app@" + DigestN(i), 10s).state ==
              Outcome::State::kReady);
    CHECK(redis.Cli("zcard imgcheck:known") == std::to_string(kImages));
    // a reloads first; its first sweep scan is held, so that b, under the old policy a moment
    // longer, meets the new policy's entries.
    fa.release = false;
    auto start = std::chrono::steady_clock::now();
    CHECK(a.SetIdentity("00000002") == kImages);
    REQUIRE(imgcheck::testing::Eventually([&] { return Counter(mb, handed) >= 1; }));
    CHECK(b.SetIdentity("00000002") == 0);  // queued by a already
    fa.release = true;
    auto judged = [&] {
      return redis.Cli(
          "eval \"return #redis.call('keys', ARGV[1])\" 0 "
          "'imgcheck:verdict:00000002:sha256:*[0-9a-f]'");
    };
    REQUIRE(imgcheck::testing::Eventually([&] { return judged() == std::to_string(kImages); }));
    // A refused entry left to the lease would take 10 s.
    CHECK(std::chrono::steady_clock::now() - start < 9s);
    CHECK(Counter(ma, reclaimed) == 0);
    CHECK(Counter(mb, reclaimed) == 0);
    CHECK(fa.calls + fb.calls == 2 * kImages);  // each judged once under each policy
  }
}

TEST_CASE("what a replica judged while Redis was down reaches Redis when it answers again",
          "[verdicts][work][redis]") {
  if (!imgcheck::testing::HaveProgram("redis-server"))
    return imgcheck::testing::Skip("redis-server not installed");
  imgcheck::testing::TempDir dir;
  RedisServer redis(dir.path());
  auto client = RedisClient::Open(redis.url(), "test-pass");
  REQUIRE(client);
  Metrics metrics;
  StreamOptions so;
  so.consumer = "a";
  so.poll = 20ms;
  so.local_limit = 3;  // the bound of what waits in memory: the degraded queue's
  VerdictOptions o;
  o.identity = "policy1";
  o.verdict_key = std::string(40, 's');
  o.queue_limit = 3;
  o.poll = 20ms;
  FakeScanner fake;
  Verdicts verdicts(fake.Get(), o, redis.Store(), metrics, MakeStreamQueue(*client, so, metrics));
  auto ref = [](int i) { return "docker://reg/app@" + DigestN(i); };
  auto key = [](int i) { return "imgcheck:verdict:policy1:" + DigestN(i); };
  REQUIRE(verdicts.Get(DigestN(0), ref(0), 10s).state == Outcome::State::kReady);
  CHECK(redis.Cli("exists " + key(0)) == "1");

  // Redis goes away (restarted without persistence): five digests are judged meanwhile, from
  // scans, one decided by an attestation (Put), as admission asks.
  redis.Stop();
  CHECK_FALSE(verdicts.SharedStoreUp());
  for (int i = 1; i <= 4; ++i)
    REQUIRE(verdicts.Get(DigestN(i), ref(i), 10s).state == Outcome::State::kReady);
  verdicts.Put(DigestN(5), std::make_shared<const Verdict>(
                               *ParseVerdict(Report("reg/bad@" + DigestN(5), true))));
  CHECK(fake.calls == 5);
  // The oldest two past the bound of three are dropped, and counted. The known set is written by
  // the work queue's worker after the scan, and a retry that failed meanwhile counts what it
  // trimmed when it gives up: the counts settle, they are not there the instant Get returns.
  CHECK(imgcheck::testing::Eventually([&] {
    return Counter(metrics, "imgcheck_degraded_dropped_total{what=\"verdict\"}") == 2 &&
           Counter(metrics, "imgcheck_degraded_dropped_total{what=\"known\"}") == 1;
  }));
  CHECK(Counter(metrics, "imgcheck_degraded_dropped_total{what=\"verdict\"}") == 2);
  CHECK(Counter(metrics, "imgcheck_degraded_dropped_total{what=\"known\"}") == 1);
  CHECK(Counter(metrics, "imgcheck_degraded_replayed_total{what=\"verdict\"}") == 0);

  redis.Start();
  // The server's watcher asks every few seconds; the work queue's workers find Redis themselves.
  REQUIRE(imgcheck::testing::Eventually([&] {
    return verdicts.SharedStoreUp() &&
           Counter(metrics, "imgcheck_degraded_replayed_total{what=\"known\"}") == 3;
  }));
  CHECK(Counter(metrics, "imgcheck_degraded_replayed_total{what=\"verdict\"}") == 3);
  for (int i : {1, 2}) CHECK(redis.Cli("exists " + key(i)) == "0");
  for (int i : {3, 4, 5}) CHECK(redis.Cli("exists " + key(i)) == "1");
  // The known set: the scans of 2, 3 and 4 (an attestation is no scan: not re-judged).
  std::string known = redis.Cli("zrange imgcheck:known 0 -1");
  CHECK(known == ref(2) + "\n" + ref(3) + "\n" + ref(4));
  CHECK(redis.Cli("zscore imgcheck:known " + ref(1)).empty());

  // Another replica takes them from Redis, sealed, without scanning; the next policy's sweep
  // re-judges the digests known.
  FakeScanner other_fake;
  Metrics other_metrics;
  Verdicts other(other_fake.Get(), o, redis.Store(), other_metrics);
  for (int i : {3, 4, 5}) {
    Outcome out = other.Get(DigestN(i), ref(i), 10s);
    REQUIRE(out.state == Outcome::State::kReady);
    CHECK(out.cached == "redis");
  }
  CHECK(other.Get(DigestN(5), ref(5), 0ms).verdict->Fails({imgcheck::rules::Severity::kError}));
  CHECK(other_fake.calls == 0);
  // Written once: nothing is left to write again.
  CHECK(verdicts.SharedStoreUp());
  CHECK(Counter(metrics, "imgcheck_degraded_replayed_total{what=\"verdict\"}") == 3);
}

TEST_CASE("the facts store keeps its bound by evicting the least recently used, one account",
          "[facts][redis]") {
  if (!imgcheck::testing::HaveProgram("redis-server"))
    return imgcheck::testing::Skip("redis-server not installed");
  imgcheck::testing::TempDir dir;
  RedisServer redis(dir.path());
  auto client = RedisClient::Open(redis.url(), "test-pass");
  REQUIRE(client);
  Metrics metrics;
  // Two replicas' stores over one Redis, 1,000 bytes in all; entries of 400 bytes once sealed
  // (a 106-byte header: the MAC's magic, key id and hex). Pauses keep the millisecond scores
  // of the order apart.
  FactsStore a(*client, VerdictSeal(std::string(32, 'k')), 1000, metrics);
  FactsStore b(*client, VerdictSeal(std::string(32, 'k')), 1000, metrics);
  const std::string v1(294, '1'), v2(294, '2'), v3(294, '3');
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
  a.Put("layer:one", v1);
  pause();
  b.Put("layer:two", v2);
  pause();
  CHECK(a.Get("layer:one") == v1);  // one is now the most recently used
  pause();
  b.Put("layer:three", v3);  // over the bound: two, the least recently used, goes
  CHECK_FALSE(a.Get("layer:two"));
  CHECK(b.Get("layer:one") == v1);
  CHECK(a.Get("layer:three") == v3);
  CHECK(std::stoul(redis.Cli("get imgcheck:facts:bytes")) <= 1000);
  CHECK(redis.Cli("hlen imgcheck:facts:sizes") == "2");
  CHECK(redis.Cli("exists imgcheck:facts:layer:two") == "0");
  CHECK_THAT(metrics.Render(),
             Catch::Contains("imgcheck_facts_evicted_total 1") &&
                 Catch::Contains("imgcheck_facts_lookups_total{result=\"miss\"} 1"));
  // A value larger than the whole bound is not stored at all.
  a.Put("layer:huge", std::string(1001, 'h'));
  CHECK_FALSE(b.Get("layer:huge"));
  CHECK(a.Get("layer:one") == v1);
  // A replica whose clock runs behind the others' writes an entry scored older than all: it is
  // still never the one evicted for its own sake.
  redis.Cli(
      "zadd imgcheck:facts:lru 99999999999999 imgcheck:facts:layer:one 99999999999999 "
      "imgcheck:facts:layer:three");
  a.Put("layer:four", v3);
  CHECK(b.Get("layer:four") == v3);
  CHECK(std::stoul(redis.Cli("get imgcheck:facts:bytes")) <= 1000);
  // Another key's store refuses what this one sealed (the replicas must share the key).
  FactsStore other(*client, VerdictSeal(std::string(32, 'o')), 1000, metrics);
  CHECK_FALSE(other.Get("layer:four"));
  CHECK_THAT(metrics.Render(),
             Catch::Contains("imgcheck_facts_rejected_total{reason=\"other_key\"} 1"));
}

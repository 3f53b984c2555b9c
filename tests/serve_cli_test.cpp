// `imgcheck serve` through the built binary, over TLS on 127.0.0.1: certificates made by openssl,
// images pushed with skopeo to a real docker-registry that notifies the server, AdmissionReview
// bodies as the API server sends them, and real redis-server shared by two servers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <thread>

#include "image_writer.h"
#include "support.h"

extern char** environ;

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// A server that closes a TLS connection (a refused client certificate) makes the client's next
// write raise SIGPIPE; ignored, it is an error the test sees, not the test process's death
// (which would leave its servers running).
const bool kIgnoreSigpipe = [] { return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();

// Tests that need a tool say so and return (ctest reads "SKIPPED:" as a skip).
bool Need(std::initializer_list<const char*> tools) {
  for (const char* t : tools)
    if (!HaveProgram(t)) {
      std::printf("SKIPPED: needs %s\n", t);
      return false;
    }
  return true;
}

// A child process with its output in `log`, stopped (SIGTERM, then SIGKILL) when destroyed.
class Process {
 public:
  Process(std::vector<std::string> argv, const fs::path& log,
          const std::vector<std::string>& env = {})
      : log_(log) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    std::vector<std::string> envs = env;  // `env` replaces what this process has
    for (char** e = environ; *e; ++e) {
      std::string_view name(*e, std::string_view(*e).find('='));
      bool replaced = false;
      for (const auto& x : env) replaced = replaced || x.substr(0, x.find('=')) == name;
      if (!replaced) envs.push_back(*e);
    }
    std::vector<char*> envp;
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    int rc = posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(rc == 0);
  }
  ~Process() { Stop(); }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  /// SIGTERM, then SIGKILL after 10 s; returns the exit status (-1: killed).
  int Stop() {
    if (pid_ <= 0) return status_;
    kill(pid_, SIGTERM);
    int st = 0;
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      std::this_thread::sleep_for(50ms);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return status_ = -1;
  }
  bool Running() { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  void Signal(int sig) { kill(pid_, sig); }
  std::string Log() const { return ReadFile(log_); }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  int status_ = -1;
};

// A CA and a server certificate for 127.0.0.1, and a client certificate, made by openssl.
struct Certificates {
  explicit Certificates(const fs::path& dir) : dir_(dir) {
    fs::create_directories(dir);
    WriteFile(dir / "server.cnf",
              "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
              "basicConstraints=critical,CA:FALSE\n");
    WriteFile(dir / "client.cnf", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n");
    Openssl("req -x509" + kEc +
            " -keyout ca.key -out ca.crt -days 2 -subj /CN=imgcheck-test-ca"
            " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign");
    Issue("server", "127.0.0.1");
    Issue("client", "apiserver");
  }
  /// Writes a fresh key and certificate for `name` (server: the serving pair).
  void Issue(const std::string& name, const std::string& cn) {
    Openssl("req" + kEc + " -keyout " + name + ".key.new -out " + name + ".csr -subj /CN=" + cn +
            " && openssl x509 -req -in " + name + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial" +
            " -out " + name + ".crt.new -days 2 -extfile " + name + ".cnf" + " && mv " + name +
            ".key.new " + name + ".key && mv " + name + ".crt.new " + name + ".crt");
  }
  fs::path operator/(const std::string& f) const { return dir_ / f; }

 private:
  void Openssl(const std::string& args) {
    CommandResult r = Run("cd '" + dir_.string() + "' && (openssl " + args + ")");
    INFO(r.output);
    REQUIRE(r.status == 0);
  }
  const std::string kEc = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  fs::path dir_;
};

// A docker-registry on 127.0.0.1 (plain HTTP), notifying `notify_url` when set.
class Registry {
 public:
  Registry(const fs::path& dir, int port, const std::string& notify_url, const fs::path& ca)
      : port_(port) {
    std::string yaml =
        "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
        "storage:\n  filesystem:\n    rootdirectory: " +
        (dir / "storage").string() + "\nhttp:\n  addr: 127.0.0.1:" + std::to_string(port) + "\n";
    if (!notify_url.empty())
      yaml += "notifications:\n  endpoints:\n    - name: imgcheck\n      url: " + notify_url +
              "\n      timeout: 5s\n      threshold: 3\n      backoff: 1s\n";
    WriteFile(dir / "config.yml", yaml);
    // Go's TLS client trusts SSL_CERT_FILE: the server's test CA.
    process_.emplace(
        std::vector<std::string>{"docker-registry", "serve", (dir / "config.yml").string()},
        dir / "registry.log", std::vector<std::string>{"SSL_CERT_FILE=" + ca.string()});
    auto deadline = Clock::now() + 15s;
    httplib::Client c("127.0.0.1", port);
    while (!c.Get("/v2/")) {
      if (Clock::now() > deadline) FAIL("docker-registry did not start:\n" + process_->Log());
      std::this_thread::sleep_for(50ms);
    }
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string Log() const { return process_->Log(); }
  /// Pushes OCI layout `layout` as `repo_tag`; returns the manifest digest the registry holds.
  std::string Push(const fs::path& layout, const std::string& repo_tag) {
    CommandResult r =
        Run("skopeo --insecure-policy copy -q --preserve-digests --dest-tls-verify=false"
            " 'oci:" +
            layout.string() + ":latest' 'docker://" + host() + "/" + repo_tag + "'");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CommandResult d = Run("skopeo inspect --tls-verify=false --format '{{.Digest}}' 'docker://" +
                          host() + "/" + repo_tag + "'");
    REQUIRE(d.status == 0);
    return d.output.substr(0, d.output.find('\n'));
  }

 private:
  int port_;
  std::optional<Process> process_;
};

// `imgcheck serve` with the test's certificates; `args` adds to the command line.
class Server {
 public:
  Server(const fs::path& dir, const Certificates& certs, std::vector<std::string> args)
      : certs_(certs) {
    fs::create_directories(dir);
    fs::path ready = dir / "port";
    std::vector<std::string> argv = {(BinaryDir() / "imgcheck").string(),
                                     "serve",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--tls-cert",
                                     (certs / "server.crt").string(),
                                     "--tls-key",
                                     (certs / "server.key").string(),
                                     "--cache-dir",
                                     (dir / "cache").string(),
                                     "--ready-file",
                                     ready.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    process_.emplace(
        argv, dir / "serve.log",
        std::vector<std::string>{"HOME=" + dir.string(), "DOCKER_CONFIG=" + dir.string(),
                                 "REGISTRY_AUTH_FILE=" + (dir / "auth.json").string()});
    auto deadline = Clock::now() + 20s;
    while (!fs::exists(ready)) {
      if (!process_->Running() || Clock::now() > deadline)
        FAIL("imgcheck serve did not start:\n" + process_->Log());
      std::this_thread::sleep_for(20ms);
    }
    port_ = std::stoi(ReadFile(ready));
  }
  int port() const { return port_; }
  std::string url(const std::string& path) const {
    return "https://127.0.0.1:" + std::to_string(port_) + path;
  }
  /// A client that checks the server against the test CA (and presents the client pair when
  /// `client_cert`).
  std::unique_ptr<httplib::SSLClient> Client(bool client_cert = false) const {
    auto c = client_cert ? std::make_unique<httplib::SSLClient>("127.0.0.1", port_,
                                                                (certs_ / "client.crt").string(),
                                                                (certs_ / "client.key").string())
                         : std::make_unique<httplib::SSLClient>("127.0.0.1", port_);
    c->set_ca_cert_path((certs_ / "ca.crt").c_str());
    c->enable_server_certificate_verification(true);
    c->set_read_timeout(60, 0);
    return c;
  }
  json Post(const std::string& path, const json& body) {
    auto res = Client()->Post(path.c_str(), body.dump(), "application/json");
    INFO(Log());
    REQUIRE(res);
    INFO(res->body);
    REQUIRE(res->status == 200);
    return json::parse(res->body);
  }
  /// The value of metric `line_prefix` ("imgcheck_scans_total{result=\"ok\"}"), 0 when absent.
  double Metric(const std::string& name) {
    auto res = Client()->Get("/metrics");
    REQUIRE(res);
    for (size_t at = res->body.find(name + " "); at != std::string::npos;)
      return std::stod(res->body.substr(at + name.size() + 1));
    return 0;
  }
  int Stop() { return process_->Stop(); }
  void Signal(int sig) { process_->Signal(sig); }
  std::string Log() const { return process_->Log(); }

 private:
  const Certificates& certs_;
  std::optional<Process> process_;
  int port_ = 0;
};

json Review(const std::string& uid, const std::string& kind, const json& object) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", uid},
            {"kind", {{"group", "apps"}, {"version", "v1"}, {"kind", kind}}},
            {"resource", {{"group", "apps"}, {"version", "v1"}, {"resource", "deployments"}}},
            {"requestKind", {{"group", "apps"}, {"version", "v1"}, {"kind", kind}}},
            {"name", "web"},
            {"namespace", "team-a"},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "kubernetes-admin"}, {"groups", {"system:masters"}}}},
            {"object", object},
            {"oldObject", nullptr},
            {"dryRun", false},
            {"options", {{"apiVersion", "meta.k8s.io/v1"}, {"kind", "CreateOptions"}}}}}};
}

json Deployment(const std::vector<std::string>& images) {
  json containers = json::array();
  for (size_t i = 0; i < images.size(); ++i)
    containers.push_back({{"name", "c" + std::to_string(i)}, {"image", images[i]}});
  json init = json::array({containers[0]});
  init[0]["name"] = "init";
  containers.erase(containers.begin());
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", "web"}, {"namespace", "team-a"}}},
          {"spec",
           {{"replicas", 2},
            {"selector", {{"matchLabels", {{"app", "web"}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", "web"}}}}},
              {"spec", {{"initContainers", init}, {"containers", containers}}}}}}}};
}

// A small image without CUDA, marked so each is its own digest.
fs::path CleanImage(const fs::path& dir, const std::string& marker) {
  ImageRecipe r;
  r.env = {"PATH=/usr/bin"};
  r.layers.push_back(
      MakeLayer({Dir("etc"), File("etc/marker", marker)}, Compression::kGzip, "COPY marker /etc/"));
  WriteOciLayout(dir / marker, r);
  return dir / marker;
}

// The README's demo image (testdata/demo): cuDNN shadowed on LD_LIBRARY_PATH (IC001).
fs::path BrokenImage() { return BinaryDir() / "demo/image"; }

template <class F>
bool Eventually(F f, std::chrono::seconds limit = 60s) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return f();
}

}  // namespace

TEST_CASE("serve: TLS, health, metrics, client certificates, body limit, certificate reload",
          "[serve]") {
  if (!Need({"openssl"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  Server s(work / "s", certs, {"--max-body", "65536"});
  auto c = s.Client();
  auto health = c->Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body == "ok\n");
  auto ready = c->Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 200);
  auto metrics = c->Get("/metrics");
  REQUIRE(metrics);
  CHECK_THAT(metrics->body,
             Catch::Contains("# TYPE imgcheck_scan_seconds histogram") &&
                 Catch::Contains("imgcheck_requests_total{path=\"/healthz\",code=\"200\"} 1") &&
                 Catch::Contains("imgcheck_scans_in_flight 0"));
  CHECK(c->Get("/nope")->status == 404);

  // Plain HTTP on the TLS port gets no answer.
  httplib::Client plain("127.0.0.1", s.port());
  plain.set_read_timeout(5, 0);
  auto p = plain.Get("/healthz");
  CHECK((!p || p->status != 200));

  // Too large a body is refused before it is read whole.
  auto big = c->Post("/v1/admission", std::string(100000, ' '), "application/json");
  REQUIRE(big);
  CHECK(big->status == 413);

  // A request that is not an AdmissionReview still gets one, allowed per --on-error.
  json bad = s.Post("/v1/admission", json{{"kind", "Nope"}});
  CHECK(bad["kind"] == "AdmissionReview");
  CHECK(bad["response"]["allowed"] == true);
  CHECK_THAT(bad["response"]["warnings"][0].get<std::string>(),
             Catch::Contains("not an AdmissionReview"));

  // Certificate rotation: new files are served without a restart.
  auto serial = [&] {
    return Run("openssl s_client -connect 127.0.0.1:" + std::to_string(s.port()) +
               " </dev/null 2>/dev/null | openssl x509 -noout -serial")
        .output;
  };
  std::string before = serial();
  REQUIRE_THAT(before, Catch::StartsWith("serial="));
  std::this_thread::sleep_for(1100ms);  // a later mtime than the first pair's
  certs.Issue("server", "127.0.0.1");
  CHECK(Eventually([&] { return serial() != before; }, 10s));
  CHECK(serial() ==
        Run("openssl x509 -noout -serial -in '" + (certs / "server.crt").string() + "'").output);
  CHECK(s.Client()->Get("/healthz")->status == 200);
  CHECK_THAT(s.Log(), Catch::Contains("reloaded"));
  CHECK(s.Stop() == 0);

  // --client-ca: no client certificate, no answer.
  Server m(work / "m", certs, {"--client-ca", (certs / "ca.crt").string()});
  CHECK_FALSE(m.Client(false)->Get("/healthz"));
  auto with = m.Client(true)->Get("/healthz");
  REQUIRE(with);
  CHECK(with->status == 200);
}

TEST_CASE("serve: a Deployment with three images, one broken, over the real registry",
          "[serve][docker-registry]") {
  if (!Need({"openssl", "docker-registry", "skopeo"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  int reg_port = FreeLoopbackPort();
  std::string reg_host = "127.0.0.1:" + std::to_string(reg_port);
  Server s(work / "s", certs, {"--allow-registry", reg_host, "--scan-budget", "60"});
  Registry reg(work / "reg", reg_port, s.url("/v1/registry-events"), certs / "ca.crt");
  std::string ok1 = reg.host() + "/team/ok1:1", ok2 = reg.host() + "/team/ok2:1",
              bad = reg.host() + "/team/cuda:1";
  std::string bad_digest = reg.Push(BrokenImage(), "team/cuda:1");
  reg.Push(CleanImage(work / "img", "one"), "team/ok1:1");
  reg.Push(CleanImage(work / "img", "two"), "team/ok2:1");

  json answer = s.Post("/v1/admission?timeout=30s",
                       Review("uid-1", "Deployment", Deployment({ok1, bad, ok2})));
  INFO(answer.dump(2));
  CHECK(answer["apiVersion"] == "admission.k8s.io/v1");
  CHECK(answer["response"]["uid"] == "uid-1");
  CHECK(answer["response"]["allowed"] == false);
  CHECK(answer["response"]["status"]["code"] == 403);
  std::string message = answer["response"]["status"]["message"];
  CHECK_THAT(message, Catch::Contains("spec.template.spec.containers[0] (c1) " + bad));
  CHECK_THAT(message, Catch::Contains(bad_digest));
  CHECK_THAT(message, Catch::Contains("IC001") &&
                          Catch::Contains("/opt/cudnn/lib64/libcudnn.so.5.0.5") &&
                          Catch::Contains("fix: "));
  CHECK_THAT(message, !Catch::Contains("ok1") && !Catch::Contains("ok2"));

  // The same review again is answered from verdicts, without scanning.
  double scans = s.Metric("imgcheck_scans_total{result=\"ok\"}");
  CHECK(scans >= 3);
  json again = s.Post("/v1/admission", Review("uid-2", "Deployment", Deployment({ok1, bad, ok2})));
  CHECK(again["response"]["allowed"] == false);
  CHECK(s.Metric("imgcheck_scans_total{result=\"ok\"}") == scans);
  CHECK(s.Metric("imgcheck_verdict_cache_hits_total{tier=\"memory\"}") >= 3);

  // Only the two clean images: allowed.
  json fine = s.Post("/v1/admission", Review("uid-3", "Deployment", Deployment({ok1, ok2})));
  CHECK(fine["response"]["allowed"] == true);

  // An image from a registry not on the allow-list is never fetched: allowed per --on-error,
  // with the reason.
  json other = s.Post("/v1/admission",
                      Review("uid-4", "Deployment", Deployment({ok1, "127.0.0.1:1/evil/x:1"})));
  CHECK(other["response"]["allowed"] == true);
  CHECK_THAT(other["response"]["warnings"].dump(), Catch::Contains("not in --allow-registry"));

  // Gatekeeper's external data: a verdict per key.
  json gk = s.Post("/v1/gatekeeper", {{"apiVersion", "externaldata.gatekeeper.sh/v1beta1"},
                                      {"kind", "ProviderRequest"},
                                      {"request", {{"keys", {ok1, bad}}}}});
  INFO(gk.dump(2));
  REQUIRE(gk["response"]["items"].size() == 2);
  CHECK(gk["response"]["items"][0]["value"]["verdict"] == "pass");
  CHECK(gk["response"]["items"][1]["value"]["verdict"] == "fail");
  CHECK(gk["response"]["items"][1]["value"]["digest"] == bad_digest);

  // A push notified by the registry is scanned before anyone asks.
  double before = s.Metric("imgcheck_scans_total{result=\"ok\"}");
  reg.Push(CleanImage(work / "img", "three"), "team/ok3:1");
  INFO("registry log:\n" << reg.Log() << "serve log:\n" << s.Log());
  CHECK(Eventually([&] { return s.Metric("imgcheck_scans_total{result=\"ok\"}") > before; }));
  Server strict(work / "strict", certs,
                {"--allow-registry", reg_host, "--scan-budget", "0", "--on-unknown", "deny"});
  json cold = strict.Post("/v1/admission",
                          Review("uid-5", "Deployment", Deployment({reg.host() + "/team/ok3:1"})));
  CHECK(cold["response"]["allowed"] == false);  // this server has no verdict yet
  CHECK_THAT(cold["response"]["status"]["message"].get<std::string>(),
             Catch::Contains("--on-unknown=deny"));
  CHECK(Eventually([&] {  // its background scan decides the next request
    json j = strict.Post("/v1/admission",
                         Review("uid-6", "Deployment", Deployment({reg.host() + "/team/ok3:1"})));
    return j["response"]["allowed"] == true;
  }));

  // A multi-arch index: the platform the node would pull (linux/amd64 by default, the pod's
  // nodeSelector otherwise) decides which manifest is judged.
  ImageRecipe amd, arm;
  amd.layers.push_back(MakeLayer({File("etc/arch", "amd64")}, Compression::kGzip, "COPY arch"));
  arm = amd;
  arm.layers[0] = MakeLayer({File("etc/arch", "arm64")}, Compression::kGzip, "COPY arch");
  arm.architecture = "arm64";
  std::vector<WrittenImage> multi = WriteMultiPlatformLayout(work / "multi", {amd, arm});
  CommandResult push =
      Run("skopeo --insecure-policy copy -q --all --preserve-digests "
          "--dest-tls-verify=false 'oci:" +
          (work / "multi").string() + ":latest' 'docker://" + reg.host() + "/team/multi:1'");
  REQUIRE(push.status == 0);
  std::string image = reg.host() + "/team/multi:1";
  json by_key = strict.Post("/v1/gatekeeper", {{"apiVersion", "externaldata.gatekeeper.sh/v1beta1"},
                                               {"kind", "ProviderRequest"},
                                               {"request", {{"keys", {image}}}}});
  CHECK(by_key["response"]["items"][0]["value"]["digest"] == multi[0].manifest_digest);
  json pod = {{"metadata", {{"name", "p"}}},
              {"spec",
               {{"nodeSelector", {{"kubernetes.io/arch", "arm64"}}},
                {"containers", {{{"name", "c"}, {"image", image}}}}}}};
  json on_arm = strict.Post("/v1/admission", Review("uid-7", "Pod", pod));
  CHECK(on_arm["response"]["allowed"] == false);  // not scanned yet, and --on-unknown=deny
  CHECK_THAT(on_arm["response"]["status"]["message"].get<std::string>(),
             Catch::Contains(multi[1].manifest_digest));
  CHECK(s.Stop() == 0);
  CHECK(strict.Stop() == 0);
}

TEST_CASE("serve: a registry that never answers does not hold a request past its deadline",
          "[serve]") {
  if (!Need({"openssl"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  // A socket that listens and never accepts: connections complete in the backlog, requests
  // sit unanswered.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(listen(fd, 16) == 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::string host = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  {
    Server s(work / "s", certs, {"--allow-registry", host, "--on-error", "deny"});
    auto start = Clock::now();
    json answer = s.Post("/v1/admission?timeout=2s",
                         Review("u", "Deployment", Deployment({host + "/stuck/app:1"})));
    auto took = Clock::now() - start;
    INFO(answer.dump(2));
    CHECK(took < 2s);  // the API server would have given up at 2 s
    CHECK(answer["response"]["allowed"] == false);
    CHECK_THAT(answer["response"]["status"]["message"].get<std::string>(),
               Catch::Contains("the registry did not answer in time") &&
                   Catch::Contains("--on-error=deny"));
    CHECK(s.Client()->Get("/healthz")->status == 200);
  }
  close(fd);
}

TEST_CASE("serve: two servers share verdicts and one scan through real Redis",
          "[serve][redis][docker-registry]") {
  if (!Need({"openssl", "docker-registry", "skopeo", "redis-server"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  int redis_port = FreeLoopbackPort();
  Process redis({"redis-server", "--port", std::to_string(redis_port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", work.path().string()},
                work / "redis.log");
  REQUIRE(Eventually(
      [&] {
        return Run("redis-cli -p " + std::to_string(redis_port) + " ping").output == "PONG\n";
      },
      10s));
  int reg_port = FreeLoopbackPort();
  Registry reg(work / "reg", reg_port, "", certs / "ca.crt");
  std::string url = "redis://127.0.0.1:" + std::to_string(redis_port);
  Server a(work / "a", certs, {"--redis", url, "--scan-budget", "60"});
  Server b(work / "b", certs, {"--redis", url, "--scan-budget", "60"});
  CHECK(a.Client()->Get("/readyz")->status == 200);

  // One asks, the other finds the verdict in Redis.
  std::string one = reg.host() + "/team/one:1";
  reg.Push(CleanImage(work / "img", "one"), "team/one:1");
  CHECK(a.Post("/v1/admission",
               Review("u1", "Deployment", Deployment({one})))["response"]["allowed"] == true);
  CHECK(b.Post("/v1/admission",
               Review("u2", "Deployment", Deployment({one})))["response"]["allowed"] == true);
  CHECK(a.Metric("imgcheck_scans_total{result=\"ok\"}") == 1);
  CHECK(b.Metric("imgcheck_scans_total{result=\"ok\"}") == 0);
  CHECK(b.Metric("imgcheck_verdict_cache_hits_total{tier=\"redis\"}") >= 1);

  // Both asked at once for an unknown digest, many times: one scan between them.
  std::string cuda = reg.host() + "/team/cuda:1";
  reg.Push(BrokenImage(), "team/cuda:1");
  std::vector<std::thread> threads;
  std::atomic<int> denied{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      Server& s = i % 2 ? a : b;
      auto res = s.Client()->Post(
          "/v1/admission", Review("c" + std::to_string(i), "Deployment", Deployment({cuda})).dump(),
          "application/json");
      if (res && res->status == 200 && json::parse(res->body)["response"]["allowed"] == false)
        ++denied;
    });
  for (auto& t : threads) t.join();
  CHECK(denied == 8);
  CHECK(a.Metric("imgcheck_scans_total{result=\"ok\"}") +
            b.Metric("imgcheck_scans_total{result=\"ok\"}") ==
        2);
  CHECK(Run("redis-cli -p " + std::to_string(redis_port) + " --scan --pattern 'imgcheck:verdict:*'")
            .output.find(":lock") == std::string::npos);  // the lock was released
  CHECK(a.Stop() == 0);
  CHECK(b.Stop() == 0);
}

TEST_CASE("serve: SIGHUP reloads the rule data `rules update` installed, as a new policy",
          "[serve]") {
  if (!Need({"openssl"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  fs::path cache = work / "rules-cache";
  Server s(work / "s", certs, {"--rules-cache", cache.string()});
  s.Signal(SIGHUP);  // the same data: reloaded all the same, under the same identity
  REQUIRE(Eventually([&] { return s.Log().find("SIGHUP: policy reloaded") != std::string::npos; }));
  std::string first = s.Log();

  // Newer data, published into a layout and installed into the server's cache.
  fs::path newer = work / "newer";
  fs::create_directories(newer);
  for (const auto& e : fs::directory_iterator(SourceDir() / "rules"))
    if (e.path().extension() == ".json") fs::copy_file(e.path(), newer / e.path().filename());
  json v = json::parse(ReadFile(newer / "version.json"));
  v["date"] = "2999-01-01";
  WriteFile(newer / "version.json", v.dump());
  std::string layout = "oci:" + (work / "layout").string() + ":1";
  REQUIRE(Run(ImgcheckCommand("rules push " + Quote(newer) + " " + layout)).status == 0);
  REQUIRE(
      Run(ImgcheckCommand("rules update " + layout + " --rules-cache " + Quote(cache))).status ==
      0);
  s.Signal(SIGHUP);
  REQUIRE(Eventually([&] {
    return s.Log().find("policy reloaded (rules data 2999-01-01+") != std::string::npos;
  }));
  std::string log = s.Log();
  auto identity = [](const std::string& text, size_t from) {
    size_t at = text.find("identity ", from);
    return at == std::string::npos ? std::string() : text.substr(at + 9, 16);
  };
  std::string before = identity(first, first.find("SIGHUP"));
  std::string after = identity(log, log.find("rules data 2999-01-01+"));
  CHECK(before.size() == 16);
  CHECK(after.size() == 16);
  CHECK(before != after);
  CHECK(s.Stop() == 0);
}

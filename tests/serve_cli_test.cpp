// `imgcheck serve` through the built binary, over TLS on 127.0.0.1: certificates made by openssl,
// images pushed with skopeo to a real docker-registry that notifies the server, AdmissionReview
// bodies as the API server sends them, and real redis-server shared by two servers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "attack.h"
#include "image_writer.h"
#include "support.h"

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
    args.reserve(argv.size() + 1);
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
    envp.reserve(envs.size() + 1);
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
  pid_t pid() const { return pid_; }
  /// SIGKILL, and the wait.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
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
    auto res = Client()->Post(path, body.dump(), "application/json");
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
    for (size_t at = res->body.find("\n" + name + " "); at != std::string::npos;)
      return std::stod(res->body.substr(at + name.size() + 2));
    return 0;
  }
  int Stop() { return process_->Stop(); }
  void Kill() { process_->Kill(); }
  pid_t pid() const { return process_->pid(); }
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

// A registry that never answers: a loopback socket that listens and never accepts, so
// connections complete in the backlog and requests sit unanswered.
class SilentRegistry {
 public:
  SilentRegistry() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~SilentRegistry() { close(fd_); }
  SilentRegistry(const SilentRegistry&) = delete;
  SilentRegistry& operator=(const SilentRegistry&) = delete;
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  /// True once a connection waits in the backlog (the listening socket reads as ready).
  bool Contacted() const {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }

 private:
  int fd_;
  int port_ = 0;
};

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

namespace {

// `object` with the JSONPatch of mutating admission `answer` applied, as the API server does
// (nlohmann::json's RFC 6902 implementation); `object` itself when the answer has no patch.
json Patched(const json& object, const json& answer) {
  const json& r = answer["response"];
  if (!r.contains("patch")) return object;
  CHECK(r["patchType"] == "JSONPatch");
  std::string b64 = r["patch"];
  std::string patch(b64.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(patch.data()),
                          reinterpret_cast<const unsigned char*>(b64.data()),
                          static_cast<int>(b64.size()));
  REQUIRE(n >= 0);
  patch.resize(static_cast<size_t>(n) - (b64.size() - b64.find_last_not_of('=') - 1));
  return object.patch(json::parse(patch));
}

std::string DigestOf(const std::string& reference) {
  CommandResult d =
      Run("skopeo inspect --tls-verify=false --format '{{.Digest}}' 'docker://" + reference + "'");
  INFO(d.output);
  REQUIRE(d.status == 0);
  return d.output.substr(0, d.output.find('\n'));
}

}  // namespace

TEST_CASE("serve: mutating admission pins the digest judged, and a tag moved later is not run",
          "[serve][docker-registry]") {
  if (!Need({"openssl", "docker-registry", "skopeo"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  int reg_port = FreeLoopbackPort();
  std::string reg_host = "127.0.0.1:" + std::to_string(reg_port);
  // --resolve-ttl 0: every review resolves the tag again, so the move shows at once.
  Server s(work / "s", certs,
           {"--allow-registry", reg_host, "--scan-budget", "60", "--resolve-ttl", "0"});
  Registry reg(work / "reg", reg_port, "", certs / "ca.crt");
  std::string app = reg.host() + "/team/app:1", cuda = reg.host() + "/team/cuda:1";
  std::string judged = reg.Push(CleanImage(work / "img", "first"), "team/app:1");
  std::string side_digest = reg.Push(CleanImage(work / "img", "side"), "team/side:1");
  std::string side = reg.host() + "/team/side@" + side_digest;
  reg.Push(BrokenImage(), "team/cuda:1");

  // The mutating review: the clean tag is pinned to the digest judged, the reference by digest
  // and the denied image are left as written.
  json deployment = Deployment({app, side, cuda});
  json mutated = s.Post("/v1/mutate?timeout=30s", Review("m-1", "Deployment", deployment));
  INFO(mutated.dump(2));
  CHECK(mutated["response"]["uid"] == "m-1");
  CHECK(mutated["response"]["allowed"] == true);
  json pinned = Patched(deployment, mutated);
  json spec = pinned["spec"]["template"]["spec"];
  CHECK(spec["initContainers"][0]["image"] == app + "@" + judged);
  CHECK(spec["containers"][0]["image"] == side);
  CHECK(spec["containers"][1]["image"] == cuda);
  CHECK(json::diff(deployment, pinned).size() == 1);

  // The API server then calls the validating webhook with the pinned object: the cuda image is
  // denied there, and without it the pinned spec is allowed.
  json validated = s.Post("/v1/admission", Review("v-1", "Deployment", pinned));
  CHECK(validated["response"]["allowed"] == false);
  CHECK_THAT(validated["response"]["status"]["message"].get<std::string>(),
             Catch::Contains(cuda) && !Catch::Contains(app));
  json without_cuda = pinned;
  without_cuda["spec"]["template"]["spec"]["containers"].erase(1);
  CHECK(s.Post("/v1/admission", Review("v-2", "Deployment", without_cuda))["response"]["allowed"] ==
        true);

  // Someone moves the tag to a broken image after the review. The node pulls the pinned
  // reference: the registry serves it the digest that was judged, not what the tag names now.
  std::string moved = reg.Push(BrokenImage(), "team/app:1");
  REQUIRE(moved != judged);
  CHECK(DigestOf(app) == moved);
  // The runtime pulls `repo:tag@digest` by the digest alone (containerd, CRI-O); skopeo wants
  // it without the tag.
  std::string pulled = spec["initContainers"][0]["image"];
  CHECK(DigestOf(reg.host() + "/team/app" + pulled.substr(pulled.find('@'))) == judged);
  CHECK(s.Post("/v1/admission", Review("v-3", "Deployment", without_cuda))["response"]["allowed"] ==
        true);
  // Unpinned, the same spec names the moved tag: that is what a validating-only gate judges
  // now, and what a node pulling the tag would run.
  json tag_only = deployment;
  tag_only["spec"]["template"]["spec"]["containers"] = json::array();
  json now = s.Post("/v1/admission?timeout=30s", Review("v-4", "Deployment", tag_only));
  CHECK(now["response"]["allowed"] == false);
  CHECK_THAT(now["response"]["status"]["message"].get<std::string>(), Catch::Contains(moved));
  // And pinning now leaves it as written: its verdict denies it.
  json again = s.Post("/v1/mutate", Review("m-2", "Deployment", tag_only));
  CHECK(again["response"]["allowed"] == true);
  CHECK_FALSE(again["response"].contains("patch"));

  // --on-unknown allow: an image not judged within the budget is pinned to the digest
  // resolved, so the verdict its scan reaches later is about what runs.
  Server quick(work / "quick", certs, {"--allow-registry", reg_host, "--scan-budget", "0"});
  std::string fresh_digest = reg.Push(CleanImage(work / "img", "fresh"), "team/fresh:1");
  std::string fresh = reg.host() + "/team/fresh:1";
  json pod = {{"metadata", {{"name", "p"}}},
              {"spec",
               {{"containers", {{{"name", "c"}, {"image", fresh}}}},
                {"ephemeralContainers", {{{"name", "dbg"}, {"image", fresh}}}}}}};
  json cold = quick.Post("/v1/mutate", Review("m-3", "Pod", pod));
  INFO(cold.dump(2));
  json cold_pinned = Patched(pod, cold);
  CHECK(cold_pinned["spec"]["containers"][0]["image"] == fresh + "@" + fresh_digest);
  CHECK(cold_pinned["spec"]["ephemeralContainers"][0]["image"] == fresh + "@" + fresh_digest);
  // An image that cannot be resolved is left as written, with the reason as a warning.
  pod["spec"]["containers"][0]["image"] = reg.host() + "/team/missing:1";
  json missing = quick.Post("/v1/mutate", Review("m-4", "Pod", pod));
  json missing_pinned = Patched(pod, missing);
  CHECK(missing_pinned["spec"]["containers"][0]["image"] == reg.host() + "/team/missing:1");
  CHECK_THAT(missing["response"]["warnings"].dump(), Catch::Contains("not pinned to a digest"));
  CHECK(quick.Metric("imgcheck_requests_total{path=\"/v1/mutate\",code=\"200\"}") == 2);
  CHECK(s.Stop() == 0);
  CHECK(quick.Stop() == 0);
}

namespace {

// A registry (cpp-httplib in this process) whose one tag moves the moment it has been read: the
// first GET of manifests/TAG answers OCI layout `first`'s image, every later one `then`'s.
// Manifests by digest and blobs come from both layouts, so a client that pulls by the digest it
// was told gets those bytes, and one that asks the tag again gets the other image.
class MovingTagRegistry {
 public:
  MovingTagRegistry(const fs::path& first, const fs::path& then)
      : port_(FreeLoopbackPort()), layouts_{Layout(first), Layout(then)} {
    server_.Get("/v2/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{}", "application/json");
    });
    server_.Get(R"(/v2/.+/manifests/(.+))",
                [this](const httplib::Request& req, httplib::Response& res) {
                  std::string ref = req.matches[1];
                  const Layout* l = nullptr;
                  if (ref.rfind("sha256:", 0) != 0) {
                    l = &layouts_[tag_reads_++ == 0 ? 0 : 1];
                  } else {
                    for (const Layout& x : layouts_)
                      if (x.digest == ref) l = &x;
                  }
                  if (l == nullptr) return void(res.status = 404);
                  res.set_header("Docker-Content-Digest", l->digest);
                  res.set_content(ReadFile(l->Blob(l->digest)), l->media_type);
                });
    server_.Get(R"(/v2/.+/blobs/(sha256:[0-9a-f]{64}))", [this](const httplib::Request& req,
                                                                httplib::Response& res) {
      for (const Layout& l : layouts_)
        if (fs::exists(l.Blob(req.matches[1])))
          return res.set_content(ReadFile(l.Blob(req.matches[1])), "application/octet-stream");
      res.status = 404;
    });
    REQUIRE(server_.bind_to_port("127.0.0.1", port_));
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~MovingTagRegistry() {
    server_.stop();
    thread_.join();
  }
  MovingTagRegistry(const MovingTagRegistry&) = delete;
  MovingTagRegistry& operator=(const MovingTagRegistry&) = delete;
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  /// The manifest digest the tag names first, and after its first read.
  std::string first() const { return layouts_[0].digest; }
  std::string then() const { return layouts_[1].digest; }
  int tag_reads() const { return tag_reads_; }

 private:
  struct Layout {
    explicit Layout(const fs::path& d) : dir(d) {
      json index = json::parse(ReadFile(d / "index.json"));
      digest = index["manifests"][0]["digest"];
      media_type = index["manifests"][0]["mediaType"];
    }
    fs::path Blob(const std::string& d) const { return dir / "blobs/sha256" / d.substr(7); }
    fs::path dir;
    std::string digest, media_type;
  };
  int port_;
  std::array<Layout, 2> layouts_;
  std::atomic<int> tag_reads_{0};
  httplib::Server server_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("serve: a tag moved between the review's resolution and the scan's pull is not pinned",
          "[serve]") {
  if (!Need({"openssl"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  MovingTagRegistry reg(CleanImage(work / "img", "judged"), BrokenImage());
  Server s(work / "s", certs,
           {"--allow-registry", reg.host(), "--scan-budget", "60", "--resolve-ttl", "0"});
  std::string app = reg.host() + "/team/app:1";
  json pod = {{"metadata", {{"name", "p"}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", app}}}}}}};
  // The review reads the tag once; the scan then pulls by the digest it named (the tag already
  // names the broken image), and the patch pins that digest.
  json mutated = s.Post("/v1/mutate?timeout=30s", Review("m", "Pod", pod));
  INFO(mutated.dump(2));
  CHECK(reg.tag_reads() == 1);
  json pinned = Patched(pod, mutated);
  CHECK(pinned["spec"]["containers"][0]["image"] == app + "@" + reg.first());
  CHECK(s.Post("/v1/admission", Review("v-1", "Pod", pinned))["response"]["allowed"] == true);
  CHECK(reg.tag_reads() == 1);  // the pinned image is never resolved by its tag
  // The tag-only spec, judged now, names the other image: denied, by its digest.
  json tag = s.Post("/v1/admission?timeout=30s", Review("v-2", "Pod", pod));
  CHECK(tag["response"]["allowed"] == false);
  CHECK_THAT(tag["response"]["status"]["message"].get<std::string>(),
             Catch::Contains(reg.then()) && Catch::Contains("IC001"));
}

TEST_CASE("serve: a registry that never answers does not hold a request past its deadline",
          "[serve]") {
  if (!Need({"openssl"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  SilentRegistry silent;
  std::string host = silent.host();
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
    // A registry push event naming it is answered within the caller's deadline too.
    json envelope = {{"events",
                      {{{"action", "push"},
                        {"target",
                         {{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                          {"repository", "stuck/app"},
                          {"digest", "sha256:" + std::string(64, '2')}}},
                        {"request", {{"host", host}}}}}}};
    start = Clock::now();
    json events = s.Post("/v1/registry-events?timeout=2s", envelope);
    CHECK(Clock::now() - start < 2s);
    CHECK(events["skipped"] == 1);
  }
}

TEST_CASE("serve: two servers share verdicts and one scan through real Redis",
          "[serve][redis][docker-registry]") {
  if (!Need({"openssl", "docker-registry", "skopeo", "redis-server"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  int redis_port = FreeLoopbackPort();
  // As shipped: Redis wants a password, and verdicts are sealed with a key both servers share.
  Process redis(
      {"redis-server", "--port", std::to_string(redis_port), "--bind", "127.0.0.1", "--requirepass",
       "redis-secret", "--save", "", "--appendonly", "no", "--dir", work.path().string()},
      work / "redis.log");
  std::string cli = "REDISCLI_AUTH=redis-secret redis-cli -p " + std::to_string(redis_port);
  REQUIRE(Eventually([&] { return Run(cli + " ping").output == "PONG\n"; }, 10s));
  int reg_port = FreeLoopbackPort();
  Registry reg(work / "reg", reg_port, "", certs / "ca.crt");
  std::string url = "redis://127.0.0.1:" + std::to_string(redis_port);
  WriteFile(work / "redis-password", "redis-secret\n");
  WriteFile(work / "verdict-key", "0123456789abcdef0123456789abcdef\n");
  std::vector<std::string> shared = {"--redis",
                                     url,
                                     "--redis-password-file",
                                     (work / "redis-password").string(),
                                     "--verdict-key-file",
                                     (work / "verdict-key").string(),
                                     "--scan-budget",
                                     "60"};
  Server a(work / "a", certs, shared);
  Server b(work / "b", certs, shared);
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
  threads.reserve(8);
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
  std::string keys = Run(cli + " --scan --pattern 'imgcheck:verdict:*'").output;
  CHECK(keys.find(":lock") == std::string::npos);  // the lock was released
  for (Server* s : {&a, &b}) {
    int rc = s->Stop();
    INFO(s->Log());
    CHECK(rc == 0);
  }

  // Anyone who can write to Redis forges the broken image's verdict: its own report, with no
  // findings, unsigned. A fresh replica ignores it, scans, and denies.
  std::istringstream key_lines(keys);
  for (std::string key; std::getline(key_lines, key);) {
    if (key.empty()) continue;
    std::string stored = Run(cli + " get '" + key + "'").output;
    json report = json::parse(stored.substr(stored.find('\n') + 1));  // after the seal line
    report["findings"] = json::array();
    WriteFile(work / "forged", report.dump());
    REQUIRE(Run(cli + " -x set '" + key + "' < " + (work / "forged").string()).status == 0);
  }
  Server c(work / "c", certs, shared);
  CHECK(c.Post("/v1/admission",
               Review("u3", "Deployment", Deployment({cuda})))["response"]["allowed"] == false);
  CHECK(c.Metric("imgcheck_verdicts_rejected_total{reason=\"unsigned\"}") >= 1);
  CHECK(c.Metric("imgcheck_scans_total{result=\"ok\"}") == 1);
  CHECK_THAT(c.Log(), Catch::Contains("fails the --verdict-key-file check (unsigned"));
  CHECK(c.Stop() == 0);
}

TEST_CASE("serve: Redis without a verdict key, and a credential for no one host, are refused",
          "[serve]") {
  TempDir work;
  auto serve = [&](const std::string& flags) {
    return Run(Quote(BinaryDir() / "imgcheck") + " serve --tls-cert " + (work / "no.crt").string() +
               " --tls-key " + (work / "no.key").string() + " " + flags + " 2>&1");
  };
  CommandResult unsigned_redis = serve("--redis redis://127.0.0.1:1");
  CHECK(unsigned_redis.status == 2);
  CHECK_THAT(unsigned_redis.output, Catch::Contains("--redis needs --verdict-key-file") &&
                                        Catch::Contains("--insecure-unsigned-verdicts"));
  CommandResult bare = serve(
      "--creds user:pass --allow-registry a.example --allow-registry "
      "b.example");
  CHECK(bare.status == 2);
  CHECK_THAT(bare.output, Catch::Contains("serve --creds needs HOST=USER:PASS"));
  WriteFile(work / "short-key", "short");
  CommandResult short_key = serve("--verdict-key-file " + (work / "short-key").string());
  CHECK(short_key.status == 2);
  CHECK_THAT(short_key.output, Catch::Contains("a key must be 32 to 4096 bytes"));
  // A crawl goes only to a registry the server may contact, named as one.
  CommandResult elsewhere = serve("--allow-registry a.example --crawl b.example/team/app");
  CHECK(elsewhere.status == 2);
  CHECK_THAT(elsewhere.output,
             Catch::Contains("--crawl b.example/team/app: registry b.example is not in "
                             "--allow-registry"));
  CommandResult no_host = serve("--crawl team/app");
  CHECK(no_host.status == 2);
  CHECK_THAT(no_host.output, Catch::Contains("--crawl 'team/app': not HOST[:PORT]"));
}

namespace {

// The paths that take an AdmissionReview: validating and mutating (digest pinning).
constexpr std::array<const char*, 2> kReviewPaths = {"/v1/admission", "/v1/mutate"};

// A review that needs no registry: its one image is from a registry outside --allow-registry,
// so it is answered at once (per --on-error).
std::string QuickReview(const std::string& uid) {
  return Review(uid, "Deployment", Deployment({"127.0.0.1:2/not/allowed:1"})).dump();
}

// Sends `request` on a new TLS connection from 127.0.0.1; the status codes answered.
std::vector<int> Ask(int port, const std::string& request, size_t responses = 1,
                     std::chrono::milliseconds timeout = 5s) {
  TlsClient c("127.0.0.1", port, timeout);
  if (!c.ok() || !c.Write(request)) return {};
  return StatusCodes(c.Read(responses));
}

// True when the server closed `fd` (or reset it) within `limit`.
bool ClosedWithin(int fd, std::chrono::milliseconds limit) {
  timeval tv{static_cast<time_t>(limit.count() / 1000),
             static_cast<suseconds_t>(limit.count() % 1000 * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n < 0) return false;  // the timeout
  }
}

}  // namespace

TEST_CASE("serve: stalled handshakes, slow headers and idle connections cost sockets, not answers",
          "[serve][attack]") {
  if (!Need({"openssl"})) return;
  size_t files = RaiseFileLimit();
  if (files < 3000) {  // 1,356 client sockets here and as many in the server
    std::printf("SKIPPED: needs ulimit -n of 3000 (it is %zu)\n", files);
    return;
  }
  TempDir work;
  Certificates certs(work / "certs");
  Server s(work / "s", certs, {"--allow-registry", "127.0.0.1:1"});
  // 300 connections that send the first byte of a TLS ClientHello and stall; 800 that send
  // nothing (from two addresses, each under the per-client cap); 256 that complete the
  // handshake and send half a request line.
  std::vector<int> stalled, idle;
  for (int i = 0; i < 300; ++i) {
    int fd = ConnectFrom("127.0.0.2", s.port());
    REQUIRE(fd >= 0);
    REQUIRE(send(fd, "\x16", 1, MSG_NOSIGNAL) == 1);
    stalled.push_back(fd);
  }
  for (int i = 0; i < 800; ++i) {
    int fd = ConnectFrom(i % 2 ? "127.0.0.3" : "127.0.0.4", s.port());
    REQUIRE(fd >= 0);
    idle.push_back(fd);
  }
  std::vector<std::unique_ptr<TlsClient>> slow;
  for (int i = 0; i < 256; ++i) {
    slow.push_back(std::make_unique<TlsClient>("127.0.0.5", s.port(), 10s));
    REQUIRE(slow.back()->ok());
    REQUIRE(slow.back()->Write("POST " + std::string(kReviewPaths[i % 2]) + " HT"));
  }
  // Meanwhile every legitimate review, each on a new connection, is answered.
  for (int i = 0; i < 20; ++i) {
    std::vector<int> codes = Ask(s.port(), PostRequest(kReviewPaths[i % 2], QuickReview("ok")));
    INFO("review " << i);
    CHECK(codes == std::vector<int>{200});
  }
  // Connections cost no thread each.
  int threads = Threads(s.pid());
  INFO("server threads: " << threads);
  CHECK(threads > 0);
  CHECK(threads < 120);
  // The handshake and header deadlines (5 s each) cut the stalled clients.
  auto give_up = 9s;
  CHECK(ClosedWithin(stalled[0], give_up));
  CHECK(ClosedWithin(idle[0], give_up));
  CHECK(slow[0]->Read(1).empty());  // closed without an answer
  size_t closed = 0;
  for (int fd : stalled) closed += ClosedWithin(fd, 100ms);
  for (int fd : idle) closed += ClosedWithin(fd, 100ms);
  CHECK(closed == 1100);
  for (int fd : stalled) close(fd);
  for (int fd : idle) close(fd);
  CHECK(s.Metric("imgcheck_http_events_total{event=\"timeout\"}") >= 1000);
  CHECK(Ask(s.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") == std::vector<int>{200});

  // More connections from one address than --max-connections-per-client are closed at once.
  Server capped(work / "capped", certs, {"--max-connections-per-client", "4"});
  std::vector<int> four;
  four.reserve(4);
  for (int i = 0; i < 4; ++i) four.push_back(ConnectFrom("127.0.0.6", capped.port()));
  int fifth = ConnectFrom("127.0.0.6", capped.port());
  CHECK(ClosedWithin(fifth, 3s));
  CHECK(Ask(capped.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") == std::vector<int>{200});
  close(fifth);
  for (int fd : four) close(fd);
  CHECK(capped.Metric("imgcheck_http_events_total{event=\"refused_peer\"}") == 1);
}

TEST_CASE("serve: a burst of connections waits in a real listen backlog, not in SYN retries",
          "[serve][attack]") {
  if (!Need({"openssl"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  Server s(work / "s", certs, {"--allow-registry", "127.0.0.1:1"});
  // While the server accepts nothing (stopped), 200 clients connect at once: the kernel
  // completes their handshakes into the listen backlog (1024; cpp-httplib's was 5, and the
  // rest paid SYN retransmits of 1 s, 3 s, 7 s...).
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{s.pid()};
  REQUIRE(kill(s.pid(), SIGSTOP) == 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(s.port()));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<pollfd> burst;
  for (int i = 0; i < 200; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
    REQUIRE((rc == 0 || errno == EINPROGRESS));
    burst.push_back({fd, POLLOUT, 0});
  }
  size_t connected = 0;
  auto until = Clock::now() + 2s;
  for (pollfd& p : burst) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    int err = -1;
    socklen_t len = sizeof err;
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) == 1 &&
        getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
      ++connected;
  }
  kill(s.pid(), SIGCONT);
  CHECK(connected == 200);
  for (pollfd& p : burst) close(p.fd);
  CHECK(Ask(s.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") == std::vector<int>{200});
}

TEST_CASE("serve: pipelining, framing and size limits, and an AdmissionReview for every body",
          "[serve][attack]") {
  if (!Need({"openssl"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  Server s(work / "s", certs,
           {"--allow-registry", "127.0.0.1:1", "--max-body", "65536", "--on-error", "deny"});
  std::string get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  size_t rss = RssBytes(s.pid());
  for (std::string path : kReviewPaths) {
    INFO(path);
    // Three requests in one write: three answers, in order, on the one connection.
    CHECK(Ask(s.port(), get + PostRequest(path, QuickReview("p")) + get, 3) ==
          std::vector<int>{200, 200, 200});
    // Expect: 100-continue (curl, for large bodies) is answered before the body is sent.
    {
      TlsClient c("127.0.0.1", s.port(), 10s);
      std::string body = QuickReview("e");
      REQUIRE(c.Write("POST " + path + " HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n" +
                      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n"));
      CHECK(StatusCodes(c.Read(1)) == std::vector<int>{100});
      REQUIRE(c.Write(body));
      CHECK(StatusCodes(c.Read(1)) == std::vector<int>{200});
    }
    // A chunked body past --max-body is refused when it passes it, not read whole.
    std::string chunk(16384, ' ');
    std::string chunked =
        "POST " + path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 128; ++i) chunked += "4000\r\n" + chunk + "\r\n";  // 2 MiB
    CHECK(Ask(s.port(), chunked) == std::vector<int>{413});
    // No framing at all: 411.
    CHECK(Ask(s.port(), "POST " + path + " HTTP/1.1\r\nHost: x\r\n\r\n{}") ==
          std::vector<int>{411});
  }
  // Header lines without end, or too many: 431.
  std::string many = "GET /healthz HTTP/1.1\r\n";
  for (int i = 0; i < 150; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  CHECK(Ask(s.port(), many + "\r\n") == std::vector<int>{431});
  std::string endless = "GET /healthz HTTP/1.1\r\n";
  while (endless.size() < (1 << 20)) endless += "X-Filler: " + std::string(50, 'x') + "\r\n";
  CHECK(Ask(s.port(), endless) == std::vector<int>{431});
  CHECK(RssBytes(s.pid()) < rss + (64 << 20));

  // Bodies that are JSON of the wrong shape, too deep, or name too many images: an
  // AdmissionReview answer per --on-error (deny here), never an HTTP error, and no patch.
  for (std::string path : kReviewPaths) {
    INFO(path);
    auto answer = [&](const std::string& body) {
      TlsClient c("127.0.0.1", s.port(), 10s);
      REQUIRE(c.Write(PostRequest(path, body)));
      std::string got = c.Read(1);
      REQUIRE(StatusCodes(got) == std::vector<int>{200});
      json j = json::parse(got.substr(got.find("\r\n\r\n") + 4));
      CHECK_FALSE(j["response"].contains("patch"));
      return j;
    };
    json kind5 = answer(R"({"kind":5,"apiVersion":["x"]})");
    CHECK(kind5["kind"] == "AdmissionReview");
    CHECK(kind5["response"]["allowed"] == false);
    CHECK_THAT(kind5["response"]["status"]["message"].get<std::string>(),
               Catch::Contains("not an AdmissionReview") && Catch::Contains("--on-error=deny"));
    json deep = answer(std::string(100, '[') + std::string(100, ']'));
    CHECK_THAT(deep["response"]["status"]["message"].get<std::string>(),
               Catch::Contains("nests deeper than 64"));
    std::vector<std::string> images;
    images.reserve(65);
    for (int i = 0; i < 65; ++i) images.push_back("127.0.0.1:2/app:" + std::to_string(i));
    json wide = answer(Review("w", "Deployment", Deployment(images)).dump());
    CHECK_THAT(wide["response"]["status"]["message"].get<std::string>(),
               Catch::Contains("65 distinct images, more than --max-images 64"));
  }
}

TEST_CASE("serve: one review of 20,000 containers gets a short answer and a short log line",
          "[serve][attack]") {
  if (!Need({"openssl"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  Server s(work / "s", certs, {"--allow-registry", "127.0.0.1:1", "--on-error", "deny"});
  std::vector<std::string> images(20000, "127.0.0.1:2/not/allowed:1");
  std::string body = Review("big", "Deployment", Deployment(images)).dump();
  size_t rss = RssBytes(s.pid());
  for (std::string path : kReviewPaths) {
    INFO(path);
    TlsClient c("127.0.0.1", s.port(), 20s);
    REQUIRE(c.Write(PostRequest(path, body)));
    std::string got = c.Read(1);
    REQUIRE(StatusCodes(got) == std::vector<int>{200});
    CHECK(got.size() < 16384);
    json j = json::parse(got.substr(got.find("\r\n\r\n") + 4));
    CHECK(j["response"]["allowed"] == false);
    // Validating: each image's problem counted; mutating: more than it pins in one object.
    CHECK_THAT(j["response"]["status"]["message"].get<std::string>(),
               path == "/v1/admission"
                   ? Catch::Contains("20000 problems") && Catch::Contains("and 19980 more")
                   : Catch::Contains("20000 images, more than the 1024 imgcheck pins") &&
                         Catch::Contains("--on-error=deny"));
  }
  CHECK(RssBytes(s.pid()) < rss + (300 << 20));
  size_t longest = 0;
  std::istringstream log(s.Log());
  for (std::string line; std::getline(log, line);) longest = std::max(longest, line.size());
  CHECK(longest < 5000);
}

namespace {

// A registry on a loopback port (cpp-httplib in this process) whose one image has a 64 MiB
// layer it sends 2 KiB at a time, every 100 ms: every read is prompt, the scan takes an hour.
class SlowRegistry {
 public:
  explicit SlowRegistry(const fs::path& dir) : port_(FreeLoopbackPort()) {
    CommandResult tar =
        Run("cd " + Quote(dir) +
            " && truncate -s 64M big && tar --format=ustar -cf - big 2>/dev/null | head -c 512");
    REQUIRE(tar.output.size() == 512);
    header_ = tar.output;
    const std::string layer = "sha256:" + std::string(64, '1');
    config_ = json{{"architecture", "amd64"},
                   {"os", "linux"},
                   {"rootfs", {{"type", "layers"}, {"diff_ids", {layer}}}}}
                  .dump();
    WriteFile(dir / "config", config_);
    config_digest_ = "sha256:" + Run("sha256sum " + Quote(dir / "config")).output.substr(0, 64);
    manifest_ = json{{"schemaVersion", 2},
                     {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                     {"config",
                      {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                       {"digest", config_digest_},
                       {"size", config_.size()}}},
                     {"layers",
                      {{{"mediaType", "application/vnd.oci.image.layer.v1.tar"},
                        {"digest", layer},
                        {"size", (64 << 20) + 1024}}}}}
                    .dump();
    WriteFile(dir / "manifest", manifest_);
    digest_ = "sha256:" + Run("sha256sum " + Quote(dir / "manifest")).output.substr(0, 64);
    server_.Get("/v2/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{}", "application/json");
    });
    server_.Get(R"(/v2/.+/manifests/.+)", [this](const httplib::Request&, httplib::Response& res) {
      res.set_header("Docker-Content-Digest", digest_);
      res.set_content(manifest_, "application/vnd.oci.image.manifest.v1+json");
    });
    server_.Get(R"(/v2/.+/blobs/(.+))",
                [this](const httplib::Request& req, httplib::Response& res) {
                  if (req.matches[1] == config_digest_)
                    return res.set_content(config_, "application/json");
                  res.set_chunked_content_provider(
                      "application/octet-stream",
                      [this, sent = false](size_t, httplib::DataSink& sink) mutable {
                        std::string piece = sent ? std::string(2048, '\0') : header_;
                        sent = true;
                        std::this_thread::sleep_for(100ms);
                        return !stop_ && sink.write(piece.data(), piece.size());
                      });
                });
    REQUIRE(server_.bind_to_port("127.0.0.1", port_));
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~SlowRegistry() {
    stop_ = true;
    server_.stop();
    thread_.join();
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_;
  std::string header_, config_, config_digest_, manifest_, digest_;
  std::atomic<bool> stop_{false};
  httplib::Server server_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("serve: SIGTERM answers the review in flight and exits within --shutdown-grace",
          "[serve][attack]") {
  if (!Need({"openssl", "tar"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  SlowRegistry reg(work.path());
  SilentRegistry silent;
  // Requests may take 30 s, longer than the grace: they are answered all the same.
  Server s(work / "s", certs,
           {"--allow-registry", reg.host(), "--allow-registry", silent.host(), "--scan-budget",
            "60", "--request-deadline", "30", "--shutdown-grace", "3"});
  // One review waits for the scan of a slow image, one for a registry that never answers.
  std::optional<json> scanning, resolving;
  auto review = [&](const std::string& uid, const std::string& image, std::optional<json>& out) {
    return std::thread([&, uid, image] {
      auto res = s.Client()->Post("/v1/admission?timeout=30s",
                                  Review(uid, "Deployment", Deployment({image})).dump(),
                                  "application/json");
      if (res && res->status == 200) out = json::parse(res->body);
    });
  };
  std::thread first = review("t1", reg.host() + "/slow/app:1", scanning);
  std::thread second = review("t2", silent.host() + "/stuck/app:1", resolving);
  REQUIRE(Eventually([&] { return s.Metric("imgcheck_scans_in_flight") == 1; }, 20s));
  REQUIRE(Eventually([&] { return silent.Contacted(); }, 20s));
  auto start = Clock::now();
  CHECK(s.Stop() == 0);
  auto took = Clock::now() - start;
  first.join();
  second.join();
  INFO(s.Log());
  CHECK(took < 3500ms);
  for (auto [uid, answer] : {std::pair{"t1", &scanning}, std::pair{"t2", &resolving}}) {
    INFO(uid);
    REQUIRE(*answer);
    CHECK((**answer)["response"]["uid"] == uid);
    CHECK((**answer)["response"]["allowed"] == true);  // --on-error allow, the default
    CHECK_THAT((**answer)["response"]["warnings"].dump(), Catch::Contains("shutting down"));
  }
  CHECK_THAT(s.Log(), Catch::Contains("abandoned"));
}

TEST_CASE("serve: Redis down is degraded, not unready, and a dead replica's lock lapses in seconds",
          "[serve][redis][attack]") {
  if (!Need({"openssl", "tar", "redis-server", "redis-cli"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  int redis_port = FreeLoopbackPort();
  std::string url = "redis://127.0.0.1:" + std::to_string(redis_port);
  SlowRegistry reg(work.path());
  // --deadline 600: a scan's lock is leased for 1.7 s (LockLease), renewed every 0.56 s.
  std::vector<std::string> flags = {"--redis",
                                    url,
                                    "--insecure-unsigned-verdicts",
                                    "--allow-registry",
                                    reg.host(),
                                    "--scan-budget",
                                    "0",
                                    "--deadline",
                                    "600"};
  Server a(work / "a", certs, flags);
  Server b(work / "b", certs, flags);
  auto metrics = [](Server& s) { return s.Client()->Get("/metrics")->body; };
  // No Redis yet: ready, and degraded.
  CHECK(a.Client()->Get("/readyz")->status == 200);
  CHECK(Eventually(
      [&] { return metrics(a).find("imgcheck_shared_store_up 0") != std::string::npos; }, 10s));
  CHECK_THAT(a.Log(), Catch::Contains("degraded"));
  Process redis({"redis-server", "--port", std::to_string(redis_port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", work.path().string()},
                work / "redis.log");
  CHECK(Eventually(
      [&] { return metrics(a).find("imgcheck_shared_store_up 1") != std::string::npos; }, 10s));
  // Redis drops every client (as a restart does): pooled connections are found dead and
  // replaced, and the store never reads as down.
  auto downs = [&] {
    std::string log = a.Log();
    size_t n = 0;
    for (size_t at = log.find("does not answer"); at != std::string::npos;
         at = log.find("does not answer", at + 1))
      ++n;
    return n;
  };
  size_t before = downs();
  std::string cli = "redis-cli -p " + std::to_string(redis_port);
  REQUIRE(Run(cli + " client kill type normal").status == 0);
  std::this_thread::sleep_for(5s);  // two checks of the store
  CHECK(downs() == before);
  CHECK(a.Client()->Get("/readyz")->status == 200);

  // a scans the slow image, holding its lock; b waits on it; a is SIGKILLed: b takes over
  // once the lock lapses (1.7 s), not after 30 minutes.
  std::string image = reg.host() + "/slow/app:1";
  a.Post("/v1/admission", Review("a", "Deployment", Deployment({image})));
  REQUIRE(Eventually([&] { return a.Metric("imgcheck_scans_in_flight") == 1; }, 20s));
  b.Post("/v1/admission", Review("b", "Deployment", Deployment({image})));
  std::this_thread::sleep_for(1s);
  CHECK(b.Metric("imgcheck_scans_in_flight") == 0);  // waiting on a's lock
  std::this_thread::sleep_for(3s);  // a renews its lock meanwhile: it outlives its lease
  CHECK(b.Metric("imgcheck_scans_in_flight") == 0);
  a.Kill();
  auto killed = Clock::now();
  CHECK(Eventually([&] { return b.Metric("imgcheck_scans_in_flight") == 1; }, 20s));
  CHECK(Clock::now() - killed < 5s);
}

namespace {

// The publisher's key pair of the rule data below, made once under `work`: the server trusts
// its public half (--rules-key), as `rules update` does.
std::string RulesKey(const TempDir& work) {
  if (!fs::exists(work / "publisher.pub"))
    REQUIRE(Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(work / "publisher")))
                .status == 0);
  return (work / "publisher.pub").string();
}

// The rule data of the tree dated 2999-01-01, published into a layout under `work`, signed with
// RulesKey and installed with `rules update` into `cache` (a server's --rules-cache): what a
// SIGHUP then loads.
void InstallNewerRules(const TempDir& work, const fs::path& cache) {
  std::string key = RulesKey(work);
  fs::path newer = work / "newer";
  fs::create_directories(newer);
  for (const auto& e : fs::directory_iterator(SourceDir() / "rules"))
    if (e.path().extension() == ".json") fs::copy_file(e.path(), newer / e.path().filename());
  json v = json::parse(ReadFile(newer / "version.json"));
  v["date"] = "2999-01-01";
  WriteFile(newer / "version.json", v.dump());
  std::string layout = "oci:" + (work / "layout").string() + ":1";
  REQUIRE(Run(ImgcheckCommand("rules push " + Quote(newer) + " " + layout + " --key " +
                              Quote(work / "publisher.key")))
              .status == 0);
  REQUIRE(Run(ImgcheckCommand("rules update " + layout + " --rules-cache " + Quote(cache) +
                              " --rules-key " + Quote(key)))
              .status == 0);
}

}  // namespace

TEST_CASE("serve: SIGHUP reloads the rule data `rules update` installed, as a new policy",
          "[serve]") {
  if (!Need({"openssl"})) return;
  TempDir work;
  Certificates certs(work / "certs");
  fs::path cache = work / "rules-cache";
  Server s(work / "s", certs, {"--rules-cache", cache.string(), "--rules-key", RulesKey(work)});
  s.Signal(SIGHUP);  // the same data: reloaded all the same, under the same identity
  REQUIRE(Eventually([&] { return s.Log().find("SIGHUP: policy reloaded") != std::string::npos; }));
  std::string first = s.Log();

  // Newer data, published into a layout and installed into the server's cache.
  InstallNewerRules(work, cache);
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

  // Installed data that is no longer what was signed is not reloaded: the bundled data is.
  WriteFile(cache / "current/cuda.json", ReadFile(cache / "current/cuda.json") + "\n ");
  s.Signal(SIGHUP);
  REQUIRE(Eventually([&] {
    return s.Log().find("cuda.json is not the file that was signed") != std::string::npos;
  }));
  REQUIRE(Eventually([&] {
    std::string l = s.Log();
    return l.find("policy reloaded", l.find("is not the file that was signed")) !=
           std::string::npos;
  }));
  std::string last = s.Log().substr(s.Log().rfind("policy reloaded"));
  CHECK_THAT(last, !Catch::Contains("2999-01-01") && Catch::Contains(before));
  CHECK(s.Stop() == 0);
}

namespace {

// A proxy in front of a docker-registry (plain HTTP on loopback) that counts the blob requests
// it forwards and can hold them: a registry that stalls mid-scan, then recovers; or drip their
// bodies at 50 bytes a second: a registry that answers, too slowly to be of use.
class HoldingProxy {
 public:
  explicit HoldingProxy(int upstream) : port_(FreeLoopbackPort()), upstream_(upstream) {
    server_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.path.find("/blobs/") != std::string::npos) {
        ++blobs_;
        auto until = Clock::now() + 120s;
        while (hold_ && !stop_ && Clock::now() < until) std::this_thread::sleep_for(20ms);
      }
      httplib::Client c("127.0.0.1", upstream_);
      c.set_read_timeout(60, 0);
      httplib::Headers headers;
      for (const auto& [name, value] : req.headers)
        if (name == "Accept" || name == "Range") headers.emplace(name, value);
      auto r = c.Get(req.target, headers);
      if (!r) {
        res.status = 502;
        return;
      }
      res.status = r->status;
      std::string type = "application/octet-stream";
      for (const auto& [name, value] : r->headers) {
        if (name == "Content-Type")
          type = value;
        else if (name != "Content-Length" && name != "Transfer-Encoding" && name != "Connection")
          res.set_header(name, value);
      }
      if (drip_ && req.method == "GET" && req.path.find("/blobs/") != std::string::npos) {
        auto body = std::make_shared<std::string>(r->body);
        res.set_chunked_content_provider(type,
                                         [this, body](size_t offset, httplib::DataSink& sink) {
                                           if (stop_ || offset >= body->size()) {
                                             sink.done();
                                             return true;
                                           }
                                           std::this_thread::sleep_for(20ms);
                                           return sink.write(body->data() + offset, 1);
                                         });
        return;
      }
      res.set_content(r->body, type);
    });
    REQUIRE(server_.bind_to_port("127.0.0.1", port_));
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~HoldingProxy() {
    stop_ = true;
    server_.stop();
    thread_.join();
  }
  HoldingProxy(const HoldingProxy&) = delete;
  HoldingProxy& operator=(const HoldingProxy&) = delete;
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  void Hold(bool on) { hold_ = on; }
  void Drip(bool on) { drip_ = on; }
  int blobs() const { return blobs_; }

 private:
  int port_, upstream_;
  std::atomic<bool> hold_{false}, drip_{false}, stop_{false};
  std::atomic<int> blobs_{0};
  httplib::Server server_;
  std::thread thread_;
};

// What the fleet's replicas share, on loopback: redis-server (no password, no persistence), a
// verdict key, and a docker-registry; the test's certificates.
struct Fleet {
  explicit Fleet(const TempDir& work)
      : certs(work / "certs"),
        port(FreeLoopbackPort()),
        redis({"redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", work.path().string()},
              work / "redis.log"),
        reg_port(FreeLoopbackPort()),
        reg(work / "reg", reg_port, "", certs / "ca.crt") {
    REQUIRE(Eventually([&] { return Cli("ping") == "PONG"; }, 10s));
    WriteFile(work / "verdict-key", "0123456789abcdef0123456789abcdef\n");
    key_file = (work / "verdict-key").string();
  }
  /// What redis-cli prints for `command`, less the last newline.
  std::string Cli(const std::string& command) const {
    std::string out = Run("redis-cli -p " + std::to_string(port) + " " + command).output;
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  /// The replicas' flags, and `more`.
  std::vector<std::string> Flags(std::vector<std::string> more) const {
    std::vector<std::string> f = {"--redis", "redis://127.0.0.1:" + std::to_string(port),
                                  "--verdict-key-file", key_file};
    f.insert(f.end(), more.begin(), more.end());
    return f;
  }
  /// Verdicts stored, of any policy.
  size_t Verdicts() const {
    std::istringstream keys(Cli("--scan --pattern 'imgcheck:verdict:*'"));
    size_t n = 0;
    for (std::string k; std::getline(keys, k);) n += k.find(":lock") == std::string::npos;
    return n;
  }
  Certificates certs;
  int port;
  Process redis;
  int reg_port;
  Registry reg;
  std::string key_file;
};

}  // namespace

TEST_CASE(
    "serve: a replica SIGKILLed with queued and running scans: the other judges every "
    "digest within a lease plus the scans",
    "[serve][redis][docker-registry][fleet]") {
  if (!Need({"openssl", "docker-registry", "skopeo", "redis-server", "redis-cli"})) return;
  TempDir work;
  Fleet fleet(work);
  HoldingProxy proxy(fleet.reg_port);
  std::vector<std::string> images;
  for (const char* name : {"k1", "k2", "k3", "k4"}) {
    fleet.reg.Push(CleanImage(work / "img", name), std::string("team/") + name + ":1");
    images.push_back(proxy.host() + "/team/" + name + ":1");
  }
  // The default --deadline: a lease of 10 s.
  auto flags = fleet.Flags({"--allow-registry", proxy.host(), "--scan-budget", "0"});
  std::vector<std::string> one_worker = flags;
  one_worker.insert(one_worker.end(), {"--workers", "1"});
  Server a(work / "a", fleet.certs, one_worker);
  Server b(work / "b", fleet.certs, flags);

  // a accepts four admission misses: one scan runs (its registry stalls), three wait behind it.
  proxy.Hold(true);
  json answer = a.Post("/v1/admission", Review("u1", "Deployment", Deployment(images)));
  CHECK(answer["response"]["allowed"] == true);  // --on-unknown allow, the scans go on
  REQUIRE(Eventually([&] { return a.Metric("imgcheck_scans_in_flight") == 1; }, 20s));
  CHECK(fleet.Cli("xlen imgcheck:work:now") == "4");
  CHECK(b.Metric("imgcheck_work_deliveries_total{priority=\"now\"}") == 0);  // all a's
  CHECK(fleet.Verdicts() == 0);

  a.Kill();
  auto killed = Clock::now();
  proxy.Hold(false);
  INFO(b.Log());
  REQUIRE(Eventually([&] { return fleet.Verdicts() == 4; }, 60s));
  auto took = Clock::now() - killed;
  std::printf("fleet: 4 digests judged by the survivor %.1f s after the SIGKILL (lease 10 s)\n",
              std::chrono::duration<double>(took).count());
  CHECK(took < 10s + 15s);  // the lease, then four small scans on a loaded machine
  CHECK(b.Metric("imgcheck_work_reclaimed_total{priority=\"now\"}") == 4);
  CHECK(b.Metric("imgcheck_scans_total{result=\"ok\"}") == 4);
  CHECK(Eventually([&] { return fleet.Cli("xlen imgcheck:work:now") == "0"; }, 10s));
  CHECK(b.Stop() == 0);
}

TEST_CASE("serve: sweeps never delay an admission miss: one admitted while 200 sweeps wait",
          "[serve][redis][docker-registry][fleet]") {
  if (!Need({"openssl", "docker-registry", "skopeo", "redis-server", "redis-cli"})) return;
  TempDir work;
  Fleet fleet(work);
  HoldingProxy proxy(fleet.reg_port);  // the sweeps' registry, which stalls
  std::vector<std::string> digests = {fleet.reg.Push(CleanImage(work / "img", "s1"), "team/s1:1"),
                                      fleet.reg.Push(CleanImage(work / "img", "s2"), "team/s2:1")};
  fleet.reg.Push(CleanImage(work / "img", "new"), "team/new:1");
  Server s(work / "s", fleet.certs,
           fleet.Flags({"--allow-registry", proxy.host(), "--allow-registry", fleet.reg.host(),
                        "--scan-budget", "30"}));
  proxy.Hold(true);
  // 200 sweep entries (what a rules reload enqueues) for the two images, as redis-cli sends
  // them.
  std::string commands;
  for (int i = 0; i < 200; ++i) {
    const std::string& d = digests[i % 2];
    commands += "XADD imgcheck:work:sweep * d " + d + " r docker://" + proxy.host() + "/team/s" +
                std::to_string(i % 2 + 1) + "@" + d + "\n";
  }
  WriteFile(work / "sweeps", commands);
  REQUIRE(
      Run("redis-cli -p " + std::to_string(fleet.port) + " < " + Quote(work / "sweeps")).status ==
      0);
  REQUIRE(Eventually([&] { return s.Metric("imgcheck_scans_in_flight") == 1; }, 20s));
  CHECK(s.Metric("imgcheck_registry_scans_in_flight{registry=\"" + proxy.host() + "\"}") == 1);

  auto start = Clock::now();
  json answer = s.Post("/v1/admission?timeout=30s",
                       Review("u", "Deployment", Deployment({fleet.reg.host() + "/team/new:1"})));
  auto took = Clock::now() - start;
  CHECK(answer["response"]["allowed"] == true);
  CHECK(s.Metric("imgcheck_admission_decisions_total{outcome=\"allow\"}") == 1);  // judged
  CHECK(took < 15s);
  CHECK(std::stoi(fleet.Cli("xlen imgcheck:work:sweep")) >= 199);  // the sweeps still wait
  CHECK(Eventually(                                                // measured every 2 s
      [&] { return s.Metric("imgcheck_work_queue_depth{priority=\"sweep\"}") >= 199; }, 10s));
  CHECK(s.Metric("imgcheck_work_queue_oldest_seconds{priority=\"sweep\"}") > 0);

  // Once the registry answers, every sweep entry is done: the two digests scanned once each,
  // the other 198 entries acknowledged without work.
  proxy.Hold(false);
  CHECK(Eventually([&] { return fleet.Cli("xlen imgcheck:work:sweep") == "0"; }, 60s));
  CHECK(s.Metric("imgcheck_scans_total{result=\"ok\"}") == 3);
  CHECK(fleet.Verdicts() == 3);
  CHECK(s.Stop() == 0);
}

namespace {

// Pushes OCI layout `layout` (as WriteOciLayout wrote it) to `host` as `repo:tag` over the
// distribution API, as a client that knows what it pushes: blobs the registry lacks (a POST,
// then a monolithic PUT), then the manifest. Milliseconds where skopeo takes a second.
void PushLayout(const std::string& host, const fs::path& layout, const WrittenImage& img,
                const std::string& repo, const std::string& tag) {
  httplib::Client c("http://" + host);
  std::vector<std::string> blobs = {img.config_digest};
  for (const WrittenLayer& l : img.layers) blobs.push_back(l.digest);
  auto path = [&](const std::string& digest) {
    return layout / "blobs" / "sha256" / digest.substr(7);
  };
  for (const std::string& d : blobs) {
    if (auto head = c.Head("/v2/" + repo + "/blobs/" + d); head && head->status == 200) continue;
    auto post = c.Post("/v2/" + repo + "/blobs/uploads/", "", "application/octet-stream");
    REQUIRE(post);
    REQUIRE(post->status == 202);
    std::string location = post->get_header_value("Location");
    location += (location.find('?') == std::string::npos ? "?" : "&") + std::string("digest=") + d;
    if (location.starts_with("http")) location = location.substr(location.find('/', 8));
    auto put = c.Put(location, ReadFile(path(d)), "application/octet-stream");
    REQUIRE(put);
    REQUIRE(put->status == 201);
  }
  auto put = c.Put("/v2/" + repo + "/manifests/" + tag, ReadFile(path(img.manifest_digest)),
                   img.manifest_media_type);
  REQUIRE(put);
  REQUIRE(put->status == 201);
}

}  // namespace

TEST_CASE(
    "serve: a rules reload re-judges 200 digests the fleet judged from the facts store, by "
    "two replicas together, none twice, with no blob request",
    "[serve][redis][docker-registry][fleet]") {
  if (!Need({"openssl", "docker-registry", "redis-server", "redis-cli"})) return;
  TempDir work;
  Fleet fleet(work);
  HoldingProxy proxy(fleet.reg_port);  // counts the blob requests the replicas make
  // 200 images that share their layer and differ in their config (an environment variable).
  constexpr size_t kImages = 200;
  std::string adds;
  for (size_t i = 0; i < kImages; ++i) {
    ImageRecipe r;
    r.env = {"PATH=/usr/bin", "IMAGE=" + std::to_string(i)};
    r.layers.push_back(MakeLayer({Dir("etc"), File("etc/marker", "shared")}, Compression::kGzip,
                                 "COPY marker /etc/"));
    fs::path layout = work / "img" / std::to_string(i);
    WrittenImage img = WriteOciLayout(layout, r);
    PushLayout(fleet.reg.host(), layout, img, "team/r" + std::to_string(i), "1");
    adds += "XADD imgcheck:work:now * d " + img.manifest_digest + " r docker://" + proxy.host() +
            "/team/r" + std::to_string(i) + "@" + img.manifest_digest + "\n";
  }
  fs::path cache = work / "rules-cache";  // both replicas read the rule data `rules update` puts
  // Sweeps paced at 10 scans a second per registry and replica.
  auto flags =
      fleet.Flags({"--allow-registry", proxy.host(), "--scan-budget", "60", "--rules-cache",
                   cache.string(), "--rules-key", RulesKey(work), "--sweep-rate", "10"});
  Server a(work / "a", fleet.certs, flags);
  Server b(work / "b", fleet.certs, flags);
  // The 200 arrive as push events would: on the queue both replicas read.
  WriteFile(work / "adds", adds);
  REQUIRE(Run("redis-cli -p " + std::to_string(fleet.port) + " < " + Quote(work / "adds")).status ==
          0);
  INFO(a.Log() << b.Log());
  REQUIRE(Eventually([&] { return fleet.Verdicts() == kImages; }, 120s));
  CHECK(fleet.Cli("zcard imgcheck:known") == std::to_string(kImages));
  int blobs_before = proxy.blobs();
  CHECK(blobs_before > 0);  // the first judgements read configs and the layer

  // Newer rule data, installed once into the cache both read, then both reload.
  InstallNewerRules(work, cache);
  a.Signal(SIGHUP);
  b.Signal(SIGHUP);
  for (Server* s : {&a, &b})
    REQUIRE(
        Eventually([&] { return s->Log().find("rules data 2999-01-01+") != std::string::npos; }));
  // One of them queued the 200; the other found the fleet had done it.
  CHECK_THAT(a.Log() + b.Log(), Catch::Contains("; 200 digests judged before queued") &&
                                    Catch::Contains("; 0 digests judged before queued"));
  auto reloaded = Clock::now();
  REQUIRE(Eventually([&] { return fleet.Verdicts() == 2 * kImages; }, 120s));  // per policy
  auto rejudged = Clock::now() - reloaded;
  std::printf("fleet: %zu digests re-judged by two replicas %.1f s after the reload\n", kImages,
              std::chrono::duration<double>(rejudged).count());
  // At 10 a second each, two replicas start 200 scans in 9.9 s at the least (the first slot
  // of each is at once), however they split them.
  CHECK(rejudged >= 9500ms);
  CHECK(Eventually([&] { return fleet.Cli("xlen imgcheck:work:sweep") == "0"; }, 10s));
  CHECK(proxy.blobs() == blobs_before);  // no blob asked for, not even a HEAD
  double scans = a.Metric("imgcheck_scans_total{result=\"ok\"}") +
                 b.Metric("imgcheck_scans_total{result=\"ok\"}");
  CHECK(scans == 2 * kImages);  // 200 before, 200 after: none judged twice
  CHECK(a.Metric("imgcheck_judged_without_pull_total") +
            b.Metric("imgcheck_judged_without_pull_total") >=
        kImages);
  for (Server* s : {&a, &b}) {  // together: each took some of the sweep
    CHECK(s->Metric("imgcheck_work_deliveries_total{priority=\"sweep\"}") >= 1);
    // A rolling reload is no dead replica: nothing reclaimed, whatever was handed back.
    CHECK(s->Metric("imgcheck_work_reclaimed_total{priority=\"sweep\"}") == 0);
  }
  CHECK(a.Stop() == 0);
  CHECK(b.Stop() == 0);
}

TEST_CASE(
    "serve: a crawl walks the catalog and tag pages and judges every digest no one asked about, "
    "once",
    "[serve][redis][docker-registry][fleet]") {
  if (!Need({"openssl", "docker-registry", "redis-server", "redis-cli"})) return;
  TempDir work;
  Fleet fleet(work);
  // 5 repositories: each an image tagged 1 and latest (one digest), the even ones a second
  // image tagged 2: 13 tags, 8 digests.
  constexpr int kRepos = 5;
  std::set<std::string> digests;
  for (int i = 0; i < kRepos; ++i) {
    std::string repo = "team/c" + std::to_string(i);
    for (int image = 0; image < (i % 2 == 0 ? 2 : 1); ++image) {
      ImageRecipe r;
      r.env = {"PATH=/usr/bin", "IMAGE=" + repo + "-" + std::to_string(image)};
      r.layers.push_back(MakeLayer({Dir("etc"), File("etc/marker", "crawl")}, Compression::kGzip,
                                   "COPY marker /etc/"));
      fs::path layout = work / "img" / (std::to_string(i) + "-" + std::to_string(image));
      WrittenImage img = WriteOciLayout(layout, r);
      for (const char* tag :
           image == 0 ? std::vector<const char*>{"1", "latest"} : std::vector<const char*>{"2"})
        PushLayout(fleet.reg.host(), layout, img, repo, tag);
      digests.insert(img.manifest_digest);
    }
  }
  REQUIRE(digests.size() == 8);
  const std::string host = fleet.reg.host();
  // Pages of 2: the catalog's 5 repositories take 3 (docker-registry's Link: </v2/_catalog?
  // last=team/c1&n=2>; rel="next"), a repository's 3 tags 2 where the registry pages tags.
  Server s(work / "s", fleet.certs,
           fleet.Flags({"--allow-registry", host, "--crawl", host, "--crawl-page-size", "2",
                        "--crawl-interval", "20", "--crawl-rate", "50"}));
  INFO(s.Log());
  REQUIRE(Eventually([&] { return fleet.Verdicts() == digests.size(); }, 90s));
  auto metric = [&](const std::string& name) {
    return s.Metric("imgcheck_crawl_" + name + "_total{registry=\"" + host + "\"}");
  };
  CHECK_THAT(s.Log(), Catch::Contains("crawl " + host +
                                      ": 5 repositories, 13 tags, 8 digests, 8 queued in"));
  CHECK(metric("pages") >= 3 + kRepos);  // more than one page of the catalog
  CHECK(metric("digests") == 8);
  CHECK(metric("queued") == 8);
  CHECK(metric("errors") == 0);
  CHECK(s.Metric("imgcheck_scans_total{result=\"ok\"}") == 8);
  CHECK(s.Metric("imgcheck_work_deliveries_total{priority=\"sweep\"}") == 8);
  CHECK(s.Metric("imgcheck_admission_decisions_total{outcome=\"allow\"}") == 0);  // none asked
  for (const std::string& d : digests)  // each judged under the policy in use
    CHECK(
        fleet.Cli("--scan --pattern 'imgcheck:verdict:*" + d.substr(7) + "*'").find(d.substr(7)) !=
        std::string::npos);

  // The next crawl finds the same digests, all judged: nothing queued.
  REQUIRE(Eventually(
      [&] {
        return s.Log().find("crawl " + host + ":", s.Log().find("crawl " + host + ":") + 1) !=
               std::string::npos;
      },
      40s));
  CHECK_THAT(s.Log(), Catch::Contains("8 digests, 0 queued in"));
  CHECK(metric("digests") == 16);
  CHECK(metric("queued") == 8);
  CHECK(s.Metric("imgcheck_scans_total{result=\"ok\"}") == 8);
  CHECK(fleet.Verdicts() == digests.size());
  CHECK(s.Stop() == 0);
}

TEST_CASE("serve: a forged or corrupted facts entry is ignored and counted, never judged from",
          "[serve][redis][docker-registry][fleet]") {
  if (!Need({"openssl", "docker-registry", "skopeo", "redis-server", "redis-cli"})) return;
  TempDir work;
  Fleet fleet(work);
  HoldingProxy proxy(fleet.reg_port);
  std::string bad = proxy.host() + "/team/cuda@" + fleet.reg.Push(BrokenImage(), "team/cuda:1");
  auto flags = fleet.Flags({"--allow-registry", proxy.host(), "--scan-budget", "60"});
  auto deny = [&](Server& s) {
    json answer = s.Post("/v1/admission", Review("u", "Deployment", Deployment({bad})));
    return answer["response"]["allowed"] == false;
  };
  {
    Server a(work / "a", fleet.certs, flags);
    CHECK(deny(a));  // IC001
    CHECK(a.Stop() == 0);
  }
  // Someone with write access to Redis but not the key: every facts entry replaced by bytes
  // of their own (a reading that says nothing is wrong would allow the image), or damaged.
  std::istringstream names(fleet.Cli("--scan --pattern 'imgcheck:facts:*:*'"));
  int forged = 0;
  for (std::string name; std::getline(names, name);) {
    if (name.find("facts:layer:") != std::string::npos)
      fleet.Cli("set " + name + " forged"), ++forged;
    else if (name.find("facts:config:") != std::string::npos)
      fleet.Cli("append " + name + " x"), ++forged;
  }
  REQUIRE(forged >= 2);  // the config and at least one layer
  std::istringstream verdicts(fleet.Cli("--scan --pattern 'imgcheck:verdict:*'"));
  for (std::string name; std::getline(verdicts, name);) fleet.Cli("del " + name);

  // Another replica (its own empty cache) judges the image again: from the registry.
  int blobs_before = proxy.blobs();
  Server b(work / "b", fleet.certs, flags);
  INFO(b.Log());
  CHECK(deny(b));
  CHECK(proxy.blobs() > blobs_before);
  CHECK(b.Metric("imgcheck_facts_rejected_total{reason=\"unsigned\"}") >= 1);  // the layers
  CHECK(b.Metric("imgcheck_facts_rejected_total{reason=\"bad_mac\"}") == 1);   // the config
  CHECK(b.Metric("imgcheck_judged_without_pull_total") == 0);
  CHECK_THAT(b.Log(), Catch::Contains("failed its seal"));
  // What it read from the registry replaced the forgeries: a third replica needs no blob.
  CHECK(b.Stop() == 0);
  std::istringstream again(fleet.Cli("--scan --pattern 'imgcheck:verdict:*'"));
  for (std::string name; std::getline(again, name);) fleet.Cli("del " + name);
  blobs_before = proxy.blobs();
  Server c(work / "c", fleet.certs, flags);
  CHECK(deny(c));
  CHECK(proxy.blobs() == blobs_before);
  CHECK(c.Metric("imgcheck_judged_without_pull_total") == 1);
  CHECK(c.Metric("imgcheck_facts_rejected_total{reason=\"bad_mac\"}") == 0);
  CHECK(c.Stop() == 0);
}

TEST_CASE(
    "serve: a dripping registry holds one worker, not all, and its transfers are abandoned by "
    "the rate floor",
    "[serve][redis][docker-registry][fleet]") {
  if (!Need({"openssl", "docker-registry", "skopeo", "redis-server", "redis-cli"})) return;
  TempDir work;
  Fleet fleet(work);
  HoldingProxy drip(fleet.reg_port);  // the same registry, reached through a dripping proxy
  for (const char* name : {"d1", "d2", "h0", "h1"})
    fleet.reg.Push(CleanImage(work / "img", name), std::string("team/") + name + ":1");
  // Two workers (so one registry's share is one), a window of 3 s for the rate floor.
  Server s(work / "s", fleet.certs,
           fleet.Flags({"--allow-registry", drip.host(), "--allow-registry", fleet.reg.host(),
                        "--workers", "2", "--read-timeout", "3", "--min-rate", "1024",
                        "--facts-max-bytes", "0"}));
  auto judge = [&](const std::string& image) {
    auto start = Clock::now();
    json answer =
        s.Post("/v1/admission?timeout=30s", Review("u", "Deployment", Deployment({image})));
    CHECK(answer["response"]["allowed"] == true);
    return Clock::now() - start;
  };
  // The healthy registry's scan time, unhindered.
  auto alone = judge(fleet.reg.host() + "/team/h0:1");
  CHECK(s.Metric("imgcheck_scans_total{result=\"ok\"}") == 1);

  drip.Drip(true);
  json answer =
      s.Post("/v1/admission",
             Review("u", "Deployment",
                    Deployment({drip.host() + "/team/d1:1", drip.host() + "/team/d2:1"})));
  CHECK(answer["response"]["allowed"] == true);  // --on-unknown allow; the scans go on
  INFO(s.Log());
  // One dripping scan runs; the other waits for its registry's share, not for a worker.
  REQUIRE(Eventually(
      [&] {
        return s.Metric("imgcheck_registry_scans_in_flight{registry=\"" + drip.host() + "\"}") ==
                   1 &&
               s.Metric("imgcheck_work_deferred_total{registry=\"" + drip.host() + "\"}") >= 1;
      },
      20s));
  auto with_drip = judge(fleet.reg.host() + "/team/h1:1");
  std::printf(
      "fairness: the healthy registry's image judged in %.2f s beside a dripping one "
      "(%.2f s alone)\n",
      std::chrono::duration<double>(with_drip).count(),
      std::chrono::duration<double>(alone).count());
  CHECK(with_drip < alone + 2s);
  CHECK(s.Metric("imgcheck_registry_scans_in_flight{registry=\"" + drip.host() + "\"}") <= 1);

  // The dripping transfers are abandoned by the rate floor (50 B/s under 1 KiB/s over 3 s),
  // long before --deadline, and the scans fail to be retried later.
  CHECK(Eventually([&] { return s.Metric("imgcheck_scans_total{result=\"failed\"}") >= 1; }, 30s));
  CHECK_THAT(s.Log(), Catch::Contains("below --min-rate"));
  drip.Drip(false);
  CHECK(s.Stop() == 0);
}

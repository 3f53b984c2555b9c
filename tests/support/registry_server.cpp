#include "registry_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "image_writer.h"

namespace imgcheck::testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool HaveRegistryTools() {
  for (const char* p : {"docker-registry", "skopeo", "htpasswd", "openssl"}) {
    if (!HaveProgram(p)) {
      Skip(std::string(p) +
           " is not installed (apt-get install docker-registry skopeo apache2-utils openssl)");
      return false;
    }
  }
  return true;
}

Registry::Registry(RegistryConfig config) : config_(std::move(config)), port_(FreeLoopbackPort()) {
  fs::path cfg = dir_ / "config.yml";
  std::string yaml =
      "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
      "storage:\n  filesystem:\n    rootdirectory: " +
      storage().string() +
      "\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:" + std::to_string(port_) + "\n";
  if (config_.tls) {
    MakeCertificates();
    yaml += "  tls:\n    certificate: " + (dir_ / "server.crt").string() +
            "\n    key: " + (dir_ / "server.key").string() + "\n";
    if (config_.client_certs) yaml += "    clientcas:\n      - " + ca().string() + "\n";
  }
  if (!config_.user.empty()) {
    CommandResult h = Run("htpasswd -Bbn '" + config_.user + "' '" + config_.password + "' > '" +
                          (dir_ / "htpasswd").string() + "'");
    REQUIRE(h.status == 0);
    yaml +=
        "auth:\n  htpasswd:\n    realm: imgcheck-test\n    path: " + (dir_ / "htpasswd").string() +
        "\n";
  }
  WriteFile(cfg, yaml);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  std::string log = (dir_ / "registry.log").string();
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::string config_path = cfg.string();
  char* argv[] = {const_cast<char*>("docker-registry"), const_cast<char*>("serve"),
                  config_path.data(), nullptr};
  int rc = posix_spawnp(&pid_, "docker-registry", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  auto deadline = Clock::now() + std::chrono::seconds(15);
  for (;;) {
    int fd = ConnectLoopback(port_);
    if (fd >= 0) {
      close(fd);
      break;
    }
    if (Clock::now() > deadline) FAIL("docker-registry did not start:\n" + ReadFile(log));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Registry::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

fs::path Registry::BlobFile(const std::string& digest) const {
  std::string hex = digest.substr(7);
  return storage() / "docker/registry/v2/blobs/sha256" / hex.substr(0, 2) / hex / "data";
}

void Registry::Push(const std::string& src, const std::string& repo_tag, const std::string& flags) {
  std::string cmd = "skopeo --insecure-policy copy -q " + flags;
  cmd += config_.tls ? " --dest-cert-dir '" + (dir_ / "certs").string() + "'"
                     : " --dest-tls-verify=false";
  if (!config_.user.empty()) cmd += " --dest-creds '" + config_.user + ":" + config_.password + "'";
  cmd += " '" + src + "' 'docker://" + host() + "/" + repo_tag + "'";
  CommandResult r = Run(cmd);
  INFO(cmd << "\n" << r.output);
  REQUIRE(r.status == 0);
}

image::RegistryOptions Registry::Options() const {
  image::RegistryOptions o;
  if (!config_.user.empty()) o.credentials.creds = {config_.user + ":" + config_.password};
  if (config_.tls) o.ca_cert = ca().string();
  return o;
}

void Registry::MakeCertificates() {
  fs::path d = dir_.path();
  fs::create_directories(d / "certs");
  std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  WriteFile(d / "san.cnf",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
            "basicConstraints=critical,CA:FALSE\n");
  std::string cmd =
      "cd '" + d.string() + "' && openssl req -x509" + ec +
      " -keyout ca.key -out certs/ca.crt -days 2 -subj /CN=imgcheck-test-ca"
      " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign"
      " && openssl req" +
      ec +
      " -keyout server.key -out server.csr -subj /CN=127.0.0.1"
      " && openssl x509 -req -in server.csr -CA certs/ca.crt -CAkey ca.key -CAcreateserial"
      " -out server.crt -days 2 -extfile san.cnf";
  if (config_.client_certs) {  // certs/client.cert + client.key, as containers-certs.d(5) has it
    WriteFile(d / "client.cnf", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n");
    cmd += " && openssl req" + ec + " -keyout certs/client.key -out client.csr -subj /CN=client" +
           " && openssl x509 -req -in client.csr -CA certs/ca.crt -CAkey ca.key" +
           " -CAcreateserial -out certs/client.cert -days 2 -extfile client.cnf";
  }
  CommandResult r = Run("(" + cmd + ")");  // all of it captured, not only the last command
  INFO(r.output);
  REQUIRE(r.status == 0);
}

std::vector<std::string> PushMarkerImages(Registry& reg, const fs::path& work,
                                          const std::vector<std::string>& tags) {
  std::vector<std::string> digests;
  for (const std::string& tag : tags) {
    ImageRecipe r;
    r.layers = {MakeLayer({File("etc/marker", tag)}, Compression::kGzip, "COPY marker")};
    digests.push_back(WriteOciLayout(work / tag, r).manifest_digest);
    reg.Push("oci:" + (work / tag).string() + ":latest", "app:" + tag);
  }
  return digests;
}

}  // namespace imgcheck::testing

// Black-box tests of imgcheck as the CI gate after a build: images built for real by buildah from
// Dockerfiles (FROM a base these tests write), findings mapped back to the Dockerfile's lines in
// every format; several reports from one scan; docker-daemon: through podman's Docker API.
// Where buildah or podman cannot run (not installed, or no namespaces or mounts in this
// container), the test case is skipped with the reason (testing::Skip), never failed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "image_writer.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;

namespace {

std::string Imgcheck() { return (BinaryDir() / "imgcheck").string(); }

fs::path Lib(const TempDir& dir, const std::string& soname) {
  SharedObject so;
  so.soname = soname;
  fs::path out = dir / ("so/" + soname);
  Compile(so, out);
  return out;
}

// The base image: a CUDA runtime with the toolkit's driver stub, as nvidia/cuda images have it.
ImageRecipe CudaBase(const TempDir& dir) {
  ImageRecipe r;
  r.env = {"PATH=/usr/bin:/bin"};
  std::vector<Entry> e = {
      FileFrom("usr/local/cuda/lib64/libcudart.so.12.4.127", Lib(dir, "libcudart.so.12")),
      Symlink("usr/local/cuda/lib64/libcudart.so.12", "libcudart.so.12.4.127"),
      FileFrom("usr/local/cuda/lib64/stubs/libcuda.so", Lib(dir, "libcuda.so.1")),
      Symlink("usr/local/cuda/lib64/stubs/libcuda.so.1", "libcuda.so")};
  r.layers.push_back({e, Compression::kGzip, "COPY cuda /usr/local/cuda"});
  return r;
}

// buildah with storage of its own (vfs: works nested and without overlay support).
class Buildah {
 public:
  std::string Cmd(const std::string& args) const {
    return "buildah --root " + Quote(store_ / "root") + " --runroot " + Quote(store_ / "run") +
           " --storage-driver vfs " + args + " 2>&1";
  }
  /// skopeo's name of this storage: "containers-storage:[vfs@ROOT+RUNROOT]".
  std::string Storage() const {
    return "containers-storage:[vfs@" + (store_ / "root").string() + "+" +
           (store_ / "run").string() + "]";
  }
  /// "" when buildah can build here, else why not: `bud --isolation chroot` mounts a
  /// container's root and needs new mount, UTS and IPC namespaces, which a container without
  /// privileges (a pristine chroot, most CI containers) does not give.
  std::string Unusable() const {
    if (!HaveProgram("buildah")) return "buildah is not installed";
    auto r = Run(Cmd("from --name probe scratch"));
    if (r.status != 0) return r.output;
    auto mounted = Run(Cmd("mount probe"));
    Run(Cmd("rm probe"));
    if (mounted.status != 0) return "buildah mount: " + mounted.output;
    auto ns = Run("unshare --mount --uts --ipc true 2>&1");
    if (ns.status != 0) return "no mount, UTS and IPC namespaces: " + ns.output;
    return "";
  }

 private:
  TempDir store_;
};

nlohmann::json Finding(const nlohmann::json& report, const std::string& rule,
                       const std::string& path_part = "") {
  for (const auto& f : report["findings"]) {
    if (f["rule"] != rule) continue;
    std::string all = f["message"];
    for (const auto& p : f["paths"]) all += " " + p.get<std::string>();
    if (all.find(path_part) != std::string::npos) return f;
  }
  return nullptr;
}

// The Dockerfile line a finding names in the JSON report; 0 when none.
int Line(const nlohmann::json& report, const std::string& rule, const std::string& path_part = "") {
  nlohmann::json f = Finding(report, rule, path_part);
  INFO(rule + " " + path_part);
  REQUIRE(f.is_object());
  return f["dockerfile"].is_object() ? f["dockerfile"]["line"].get<int>() : 0;
}

const char* kDockerfile =
    "# syntax=docker/dockerfile:1\n"                            // 1
    "ARG BASE=localhost/gate-base\n"                            // 2
    "FROM ${BASE} AS tools\n"                                   // 3
    "COPY etc /etc/tools\n"                                     // 4
    "FROM tools\n"                                              // 5
    "# a vendored cuDNN that no package owns\n"                 // 6
    "COPY lib /opt/cudnn/lib64\n"                               // 7
    "ENV LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs:lib \\\n"  // 8
    "    OTHER=1\n"                                             // 9
    "LABEL purpose=imgcheck-test\n";                            // 10

}  // namespace

TEST_CASE("dockerfile: findings of a buildah-built image map to their lines", "[gate]") {
  Buildah buildah;
  if (std::string why = buildah.Unusable(); !why.empty()) {
    return Skip("needs buildah: " + why);
  }
  TempDir dir;
  WriteOciLayout(dir / "base", CudaBase(dir));
  // Into buildah's storage under a name the Dockerfile can use (buildah pull would name it
  // after the layout's path).
  auto copied = Run("skopeo copy -q oci:" + (dir / "base").string() + ":latest '" +
                    buildah.Storage() + "localhost/gate-base:latest' 2>&1");
  INFO(copied.output);
  REQUIRE(copied.status == 0);

  fs::path ctx = dir / "repo/images/gpu";
  fs::create_directories(dir / "repo/.git");  // the Dockerfile lives in a repository
  WriteFile(ctx / "Dockerfile", kDockerfile);
  WriteFile(ctx / "etc/tools.conf", "tools\n");
  fs::create_directories(ctx / "lib");
  fs::copy_file(Lib(dir, "libcudnn.so.8"), ctx / "lib/libcudnn.so.8");

  // buildah without --layers commits each stage as one layer; with it, one per instruction.
  for (std::string mode : {"", "--layers"}) {
    INFO("buildah bud " << mode);
    std::string tag = mode.empty() ? "localhost/gate:squashed" : "localhost/gate:layers";
    auto built =
        Run(buildah.Cmd("bud --isolation chroot " + mode + " -t " + tag + " " + Quote(ctx)));
    INFO(built.output);
    REQUIRE(built.status == 0);
    fs::path out = dir / ("out" + mode);
    REQUIRE(Run(buildah.Cmd("push " + tag + " oci:" + out.string() + ":latest")).status == 0);

    std::string ref = "oci:" + out.string() + ":latest";
    auto scan = Run("cd " + Quote(dir.path()) + " && '" + Imgcheck() + "' scan " + ref +
                    " --dockerfile " + Quote(ctx / "Dockerfile") + " --fail-on warning" +
                    " --output json=r.json --output sarif=r.sarif --output codequality=r.cq" +
                    " --output junit=r.xml --output r.txt --format text 2>&1");
    INFO(scan.output);
    CHECK(scan.status == 1);
    auto j = nlohmann::json::parse(ReadFile(dir / "r.json"));
    INFO(j.dump(1));
    CHECK(Line(j, "IC051", "/opt/cudnn/lib64") == 7);       // the COPY that put it there
    CHECK(Line(j, "IC051", "/usr/local/cuda/lib64") == 3);  // from the base image: its FROM
    CHECK(Line(j, "IC020") == 8);  // the stub comes from the base; the ENV put it on the path
    CHECK(Line(j, "IC060") == 8);  // a configuration finding: the ENV that set the variable
    CHECK(Finding(j, "IC060")["dockerfile"]["path"] == "images/gpu/Dockerfile");
    CHECK(Finding(j, "IC060")["dockerfile"]["end_line"] == 9);

    std::string text = ReadFile(dir / "r.txt");
    INFO(text);
    CHECK(text.find("images/gpu/Dockerfile:7: COPY lib /opt/cudnn/lib64") != std::string::npos);
    CHECK(text.find("images/gpu/Dockerfile:8: ENV LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs:lib "
                    "OTHER=1") != std::string::npos);

    auto sarif = Run("python3 " + Quote(SourceDir() / "testdata/sarif/validate.py") + " " +
                     Quote(dir / "r.sarif"));
    INFO(sarif.output);
    CHECK(sarif.status == 0);
    auto s = nlohmann::json::parse(ReadFile(dir / "r.sarif"));
    bool on_line_7 = false;
    for (const auto& r : s["runs"][0]["results"]) {
      const auto& pl = r["locations"][0]["physicalLocation"];
      CHECK(pl["artifactLocation"]["uri"] == "images/gpu/Dockerfile");
      on_line_7 |= r["ruleId"] == "IC051" && pl["region"]["startLine"] == 7;
    }
    CHECK(on_line_7);

    auto cq = nlohmann::json::parse(ReadFile(dir / "r.cq"));
    REQUIRE(cq.size() == j["findings"].size());
    for (const auto& issue : cq) CHECK(issue["location"]["path"] == "images/gpu/Dockerfile");

    // JUnit fails what --fail-on fails: warnings and errors here, not the info findings.
    std::string junit = ReadFile(dir / "r.xml");
    size_t serious = 0;
    for (const auto& f : j["findings"]) serious += f["severity"] != "info";
    std::set<std::string> failing;
    for (const auto& f : j["findings"])
      if (f["severity"] != "info") failing.insert(f["rule"].get<std::string>());
    CHECK(serious >= 2);
    CHECK(junit.find("failures=\"" + std::to_string(failing.size()) + "\"") != std::string::npos);
    CHECK(junit.find("<skipped message=\"no target driver") != std::string::npos);
  }
}

TEST_CASE("output: FORMAT=FILE repeated, and a plain FILE", "[gate]") {
  TempDir dir;
  WriteOciLayout(dir / "img", CudaBase(dir));
  std::string ref = "oci:" + (dir / "img").string() + ":latest";
  auto r = Run("cd " + Quote(dir.path()) + " && '" + Imgcheck() + "' scan " + ref +
               " --format json --output plain.json --output sarif=a.sarif 2>&1");
  INFO(r.output);
  CHECK(r.output.empty());  // nothing on stdout when every report goes to a file
  CHECK(nlohmann::json::parse(ReadFile(dir / "plain.json"))["schema"] == "imgcheck-report/1");
  CHECK(nlohmann::json::parse(ReadFile(dir / "a.sarif"))["version"] == "2.1.0");
  auto bad = Run("'" + Imgcheck() + "' scan " + ref + " --output sarif= 2>&1");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("--output: sarif= names no file") != std::string::npos);
  auto missing = Run("'" + Imgcheck() + "' scan " + ref + " --dockerfile /nonexistent 2>&1");
  CHECK(missing.status == 2);
  CHECK(missing.output.find("--dockerfile: /nonexistent does not exist") != std::string::npos);
  WriteFile(dir / "Dockerfile.bad", "RUN make\n");
  auto unparsable = Run("'" + Imgcheck() + "' scan " + ref + " --dockerfile " +
                        Quote(dir / "Dockerfile.bad") + " 2>&1");
  CHECK(unparsable.status == 2);
  CHECK(unparsable.output.find("line 1: RUN before the first FROM") != std::string::npos);
}

TEST_CASE("containers-storage: says how to export the image", "[gate]") {
  auto r = Run("'" + Imgcheck() + "' scan containers-storage:localhost/app 2>&1");
  CHECK(r.status == 2);
  CHECK(r.output.find("podman save") != std::string::npos);
  CHECK(r.output.find("buildah push localhost/app oci:DIR") != std::string::npos);
}

TEST_CASE("docker-daemon: reads an image from podman's Docker API", "[gate]") {
  if (!HaveProgram("podman")) {
    return Skip("needs podman");
  }
  TempDir dir;
  std::string podman = "podman --root " + Quote(dir / "root") + " --runroot " + Quote(dir / "run") +
                       " --storage-driver vfs";
  WriteDockerArchive(dir / "in.tar", CudaBase(dir), "localhost/daemon-test:v1");
  auto loaded = Run(podman + " load -i " + Quote(dir / "in.tar") + " 2>&1");
  if (loaded.status != 0) {
    return Skip("needs a working podman: " + loaded.output);
  }
  fs::path sock = dir / "api.sock";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0);
    std::string cmd = "exec " + podman + " system service --time=0 unix://" + sock.string() + " >" +
                      Quote(dir / "service.log") + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  struct Stop {
    pid_t pid;
    ~Stop() {
      kill(-pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  } stop{pid};
  std::string host = "DOCKER_HOST=unix://" + sock.string() + " ";
  bool up = false;
  for (int i = 0; i < 150 && !up; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    up = fs::exists(sock);
  }
  if (!up) {
    return Skip("podman system service did not start: " + ReadFile(dir / "service.log"));
  }
  fs::create_directories(dir / "tmp");
  auto daemon = Run(host + "TMPDIR=" + Quote(dir / "tmp") + " '" + Imgcheck() +
                    "' scan docker-daemon:localhost/daemon-test:v1 --format json --no-cache 2>&1");
  auto archive = Run("'" + Imgcheck() + "' scan docker-archive:" + (dir / "in.tar").string() +
                     " --format json --no-cache 2>&1");
  INFO(daemon.output);
  REQUIRE(archive.status == 0);  // one info finding (IC051): reported, not failing
  CHECK(daemon.status == archive.status);
  auto d = nlohmann::json::parse(daemon.output);
  auto a = nlohmann::json::parse(archive.output);
  CHECK(d["image"]["transport"] == "docker-daemon");
  CHECK(d["image"]["reference"] == "docker-daemon:localhost/daemon-test:v1");
  CHECK(d["image"]["config_digest"] == a["image"]["config_digest"]);  // the same image
  auto summary = [](const nlohmann::json& report) {
    std::vector<std::string> out;
    for (const auto& f : report["findings"]) out.push_back(f["rule"].dump() + f["paths"].dump());
    return out;
  };
  CHECK_FALSE(summary(a).empty());
  CHECK(summary(d) == summary(a));

  auto missing = Run(host + "'" + Imgcheck() + "' scan docker-daemon:localhost/not-there 2>&1");
  CHECK(missing.status == 2);
  CHECK(missing.output.find("docker-daemon:localhost/not-there: the Docker Engine at unix://") !=
        std::string::npos);
  auto down = Run("DOCKER_HOST=unix://" + (dir / "none.sock").string() + " '" + Imgcheck() +
                  "' scan docker-daemon:x 2>&1");
  CHECK(down.status == 2);
  CHECK(down.output.find("cannot reach the Docker Engine at unix://") != std::string::npos);
  CHECK(fs::is_empty(dir / "tmp"));  // streamed: no temporary archive
}

TEST_CASE("every rule has the rules/README.md heading its SARIF helpUri links to", "[gate]") {
  std::string readme = ReadFile(SourceDir() / "rules/README.md");
  size_t rules = 0;
  for (const char* file : {"rules/rules.json", "rules/probe.json"}) {
    nlohmann::json table = nlohmann::json::parse(ReadFile(SourceDir() / file));
    for (const auto& r : table["rules"]["rows"]) {
      std::string heading =
          "\n### " + r["id"].get<std::string>() + " " + r["name"].get<std::string>() + "\n";
      INFO(heading);
      CHECK(readme.find(heading) != std::string::npos);
      ++rules;
    }
  }
  CHECK(rules >= 20);
}

namespace {

// A stand-in for the Docker Engine API on a unix socket: GET /images/NAME/get answers with the
// bytes of `archive` (read at each request), anything else 404 with the engine's JSON error.
constexpr const char* kFakeEngine = R"py(
import http.server, os, socketserver, sys
sock, archive = sys.argv[1], sys.argv[2]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.endswith("/get") and "missing" not in self.path:
            code, body = 200, open(archive, "rb").read()
        else:
            code, body = 404, b'{"message":"No such image: missing:latest"}'
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
class Server(socketserver.UnixStreamServer):
    def get_request(self):
        request, _ = super().get_request()
        return request, ("local", 0)
Server(sock, Handler).serve_forever()
)py";

}  // namespace

TEST_CASE("docker-daemon: the export is streamed and verified like a docker save file", "[gate]") {
  TempDir dir;
  WriteFile(dir / "engine.py", kFakeEngine);
  fs::path sock = dir / "engine.sock";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execlp("python3", "python3", (dir / "engine.py").c_str(), sock.c_str(),
           (dir / "archive.tar").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  struct Stop {
    pid_t pid;
    ~Stop() {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  } stop{pid};
  for (int i = 0; i < 100 && !fs::exists(sock); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(fs::exists(sock));

  ImageRecipe r = CudaBase(dir);
  r.layers[0].compression = Compression::kNone;  // as docker save writes them
  r.layers[0].entries.push_back(File("etc/marker", "MARKER-ORIGINAL"));
  std::string env = "DOCKER_HOST=unix://" + sock.string() + " ";
  auto scan = [&](const std::string& ref) {
    return Run(env + "'" + Imgcheck() + "' scan " + ref + " --format json --no-cache 2>&1");
  };
  for (auto form : {DockerArchiveForm::kLegacy, DockerArchiveForm::kOci}) {
    INFO((form == DockerArchiveForm::kLegacy ? "legacy" : "OCI") << " docker-archive");
    WriteDockerArchive(dir / "archive.tar", r, "localhost/app:1", form);
    auto streamed = scan("docker-daemon:localhost/app:1");
    auto file = scan("docker-archive:" + (dir / "archive.tar").string());
    INFO(streamed.output);
    REQUIRE(streamed.status == 0);
    auto s = nlohmann::json::parse(streamed.output);
    auto f = nlohmann::json::parse(file.output);
    CHECK(s["findings"].size() == 1);  // IC051: libcudart belongs to no package
    CHECK(s["findings"] == f["findings"]);
    CHECK(s["image"]["config_digest"] == f["image"]["config_digest"]);

    // One byte of the layer changed in transit: the diff_id (and digest) no longer match.
    std::string bytes = ReadFile(dir / "archive.tar");
    size_t at = bytes.find("MARKER-ORIGINAL");
    REQUIRE(at != std::string::npos);
    bytes.replace(at, 15, "MARKER-TAMPERED");
    WriteFile(dir / "archive.tar", bytes);
    auto tampered = scan("docker-daemon:localhost/app:1");
    CHECK(tampered.status == 2);
    CHECK(tampered.output.find("mismatch") != std::string::npos);
  }
  auto missing = scan("docker-daemon:missing");
  CHECK(missing.status == 2);
  CHECK(missing.output.find("says: No such image: missing:latest") != std::string::npos);
}

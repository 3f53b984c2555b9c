// The registry transport against the real CNCF distribution registry (Debian's docker-registry)
// filled by skopeo, with TLS made by openssl and htpasswd auth; a small proxy in this process
// cuts connections, injects 429s, redirects blobs and plays a bearer token service.
#include "image/registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "image/artifact.h"
#include "image/image.h"
#include "image/registry_auth.h"
#include "image/registry_http.h"
#include "image/registry_reference.h"
#include "image_writer.h"
#include "registry_server.h"
#include "support.h"
#include "util/error.h"
#include "util/sha256.h"

namespace imgcheck::image {
namespace {

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// References, challenges, tokens, credentials: plain data.

Reference Parse(const std::string& text) {
  auto r = ParseReference(text);
  INFO(text << ": " << (r ? "" : r.error().message));
  REQUIRE(r.has_value());
  return r.value();
}

const std::string kDigest = "sha256:" + std::string(64, 'a');

TEST_CASE("registry references follow the distribution grammar", "[registry]") {
  Reference r = Parse("ubuntu");
  CHECK(r.domain == "docker.io");
  CHECK(r.path == "library/ubuntu");
  CHECK(r.tag == "latest");
  CHECK(r.ApiHost() == "registry-1.docker.io");
  CHECK(r.String() == "docker.io/library/ubuntu:latest");

  r = Parse("docker://nvidia/cuda:12.1.1-cudnn8-runtime-ubuntu22.04");
  CHECK(r.domain == "docker.io");
  CHECK(r.path == "nvidia/cuda");
  CHECK(r.tag == "12.1.1-cudnn8-runtime-ubuntu22.04");

  r = Parse("index.docker.io/library/busybox:1");
  CHECK(r.domain == "docker.io");
  r = Parse("docker.io/busybox");
  CHECK(r.path == "library/busybox");

  r = Parse("localhost/x");
  CHECK(r.domain == "localhost");
  CHECK(r.path == "x");
  r = Parse("localhost:5000/a/b-c/d__e:v1.0");
  CHECK(r.domain == "localhost:5000");
  CHECK(r.path == "a/b-c/d__e");
  CHECK(r.ApiHost() == "localhost:5000");

  r = Parse("127.0.0.1:5000/x@" + kDigest);
  CHECK(r.domain == "127.0.0.1:5000");
  CHECK(r.tag.empty());
  CHECK(r.digest == kDigest);
  CHECK(r.ManifestRef() == kDigest);

  r = Parse("quay.io/org/img:tag@" + kDigest);
  CHECK(r.tag == "tag");
  CHECK(r.ManifestRef() == kDigest);
  CHECK(r.String() == "quay.io/org/img:tag@" + kDigest);

  r = Parse("[::1]:5000/x");
  CHECK(r.domain == "[::1]:5000");
  r = Parse("Registry.Example.com/x");
  CHECK(r.domain == "Registry.Example.com");
  r = Parse("UPPER/x");  // upper case marks a host, not a path (reference.splitDomain)
  CHECK(r.domain == "UPPER");
  r = Parse("myhost:5000");  // a name and a tag, as docker reads it
  CHECK(r.path == "library/myhost");
  CHECK(r.tag == "5000");

  for (const char* bad : {"", "docker://", "x/UPPER", "x:", "x:-bad", "a//b", "a/-b", "a/b-",
                          "x@sha256:abc", "x@md5:0123456789abcdef0123456789abcdef", ":tag",
                          "host:port/x", "a/b..c", "has space", "x/y:"}) {
    auto bad_ref = ParseReference(bad);
    INFO(bad);
    CHECK_FALSE(bad_ref.has_value());
    if (!bad_ref) CHECK(bad_ref.error().message.find("invalid image reference") == 0);
  }
  CHECK(ParseReference("x/UPPER").error().message.find("lowercase") != std::string::npos);
  CHECK_FALSE(ParseReference(std::string(300, 'a')).has_value());
}

TEST_CASE("WWW-Authenticate challenges and token answers parse", "[registry]") {
  auto c =
      ParseChallenges(R"(Bearer realm="https://auth.docker.io/token",service="registry.docker.io",)"
                      R"(scope="repository:library/ubuntu:pull,push")");
  REQUIRE(c.size() == 1);
  CHECK(c[0].scheme == "bearer");
  CHECK(c[0].params["realm"] == "https://auth.docker.io/token");
  CHECK(c[0].params["service"] == "registry.docker.io");
  CHECK(c[0].params["scope"] == "repository:library/ubuntu:pull,push");

  c = ParseChallenges(
      R"(Basic realm="a \"quoted\" realm", Bearer realm=http://x/t, error=invalid)");
  REQUIRE(c.size() == 2);
  CHECK(c[0].scheme == "basic");
  CHECK(c[0].params["realm"] == "a \"quoted\" realm");
  CHECK(c[1].params["realm"] == "http://x/t");
  CHECK(c[1].params["error"] == "invalid");
  CHECK(ParseChallenges("").empty());

  CHECK(ParseTokenResponse(R"({"token":"t1","expires_in":300})").value == "t1");
  CHECK(ParseTokenResponse(R"({"token":"t1","expires_in":300})").expires_in == 300);
  CHECK(ParseTokenResponse(R"({"access_token":"t2"})").value == "t2");
  CHECK(ParseTokenResponse(R"({"token":"","access_token":"t3"})").value == "t3");
  CHECK(ParseTokenResponse("not json").value.empty());
  CHECK(ParseTokenResponse(R"({"token":5})").value.empty());

  std::string decoded;
  for (std::string s : {"", "a", "ab", "abc", "user:pa:ss\xff"}) {
    REQUIRE(Base64Decode(Base64Encode(s), decoded));
    CHECK(decoded == s);
  }
  CHECK(Base64Encode("alice:secret") == "YWxpY2U6c2VjcmV0");
  CHECK_FALSE(Base64Decode("a*b", decoded));
}

TEST_CASE("URL escaping reads only the view it is given", "[registry]") {
  CHECK(UrlEscape("repository:a/b:pull") == "repository%3Aa%2Fb%3Apull");
  // Found by fuzz_registry: curl_easy_escape takes length 0 to mean strlen(), which read past an
  // empty view into whatever followed it.
  CHECK(UrlEscape(std::string_view("a b").substr(0, 0)).empty());
}

// Sets (or, with nullopt, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// An environment where only the test's own auth files exist, and 127.0.0.1 is reached directly.
struct IsolatedAuth {
  TempDir home;
  ScopedEnv h{"HOME", home.path().string()};
  ScopedEnv a{"REGISTRY_AUTH_FILE", std::nullopt};
  ScopedEnv x{"XDG_RUNTIME_DIR", std::nullopt};
  ScopedEnv d{"DOCKER_CONFIG", std::nullopt};
  ScopedEnv p1{"http_proxy", std::nullopt}, p2{"https_proxy", std::nullopt};
  ScopedEnv p3{"HTTPS_PROXY", std::nullopt}, p4{"all_proxy", std::nullopt};
  ScopedEnv p5{"ALL_PROXY", std::nullopt};
};

TEST_CASE("a listing's next page comes from its Link header, on its own origin and endpoint",
          "[registry]") {
  const std::string page = "http://127.0.0.1:5000/v2/_catalog?n=2";
  auto next = [&](std::string_view link) { return NextPageUrl(page, link); };
  // docker-registry's form: a relative reference, rel quoted.
  CHECK(*next(R"(</v2/_catalog?last=b&n=2>; rel="next")") ==
        "http://127.0.0.1:5000/v2/_catalog?last=b&n=2");
  // Absolute on the same origin; rel unquoted, in another case, among other relations and links.
  CHECK(*next("<http://127.0.0.1:5000/v2/_catalog?last=c>; rel=NEXT") ==
        "http://127.0.0.1:5000/v2/_catalog?last=c");
  CHECK(
      *next(
          R"(</v2/_catalog?first>; rel="first", </v2/_catalog?last=d>; title="x;y"; rel="prev next")") ==
      "http://127.0.0.1:5000/v2/_catalog?last=d");
  CHECK(*NextPageUrl("http://127.0.0.1:5000/v2/team/app/tags/list?n=1",
                     R"(</v2/team/app/tags/list?last=v1&n=1>; rel="next")") ==
        "http://127.0.0.1:5000/v2/team/app/tags/list?last=v1&n=1");
  // None, or malformed: the walk ends there.
  for (std::string_view none :
       {"", "   ", R"(</v2/_catalog?last=b>; rel="prev")", R"(/v2/_catalog?last=b; rel="next")",
        R"(</v2/_catalog?last=b; rel="next")", R"(</v2/_catalog?last=b>; rel="next)", "garbage <",
        ",,,"})
    CHECK(next(none).value().empty());
  // Another host, another port, another scheme, another listing: refused, with the reason.
  for (std::string_view elsewhere :
       {R"(<http://evil.example/v2/_catalog?last=b>; rel="next")",
        R"(<http://127.0.0.1:5001/v2/_catalog?last=b>; rel="next")",
        R"(<https://127.0.0.1:5000/v2/_catalog?last=b>; rel="next")"}) {
    util::Expected<std::string> refused = next(elsewhere);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("another host"));
  }
  util::Expected<std::string> other = next(R"(</v2/team/app/manifests/latest>; rel="next")");
  REQUIRE_FALSE(other);
  CHECK_THAT(other.error().message, Catch::Contains("another listing"));
}

TEST_CASE("credentials come from --creds, auth files and credential helpers", "[registry]") {
  IsolatedAuth env;
  // Nothing anywhere: anonymous, and the message says what was searched.
  Credential none = FindCredential("example.com", {});
  CHECK(none.anonymous());
  CHECK(none.Describe().find("no credentials") == 0);

  Credential flag = FindCredential("example.com", {{"bob:s3cr3t:x"}, ""});
  CHECK(flag.username == "bob");
  CHECK(flag.password == "s3cr3t:x");
  CHECK(flag.Describe() == "user 'bob' from --creds");
  CHECK_THROWS_AS(FindCredential("example.com", {{"nocolon"}, ""}), util::Fatal);

  // ~/.docker/config.json with base64 auth; docker.io under its legacy index URL.
  std::string docker_config = env.home / ".docker/config.json";
  WriteFile(docker_config, R"({"auths":{"https://index.docker.io/v1/":{"auth":")" +
                               Base64Encode("hub:hubpass") + R"("},"example.com:5000":{"auth":")" +
                               Base64Encode("ex:expass") + R"("}}})");
  Credential hub = FindCredential("docker.io", {});
  CHECK(hub.username == "hub");
  CHECK(hub.password == "hubpass");
  CHECK(hub.source == docker_config);
  CHECK(hub.Describe().find("hubpass") == std::string::npos);
  CHECK(FindCredential("example.com:5000", {}).username == "ex");
  CHECK(FindCredential("other.example", {}).anonymous());
  CHECK(FindCredential("docker.io", {{"cli:wins"}, ""}).username == "cli");

  // REGISTRY_AUTH_FILE comes before the docker config.
  fs::path auth_file = env.home / "auth.json";
  WriteFile(auth_file,
            R"({"auths":{"example.com:5000":{"auth":")" + Base64Encode("podman:pp") + R"("}}})");
  {
    ScopedEnv a("REGISTRY_AUTH_FILE", auth_file.string());
    CHECK(FindCredential("example.com:5000", {}).username == "podman");
    CHECK(FindCredential("docker.io", {}).username == "hub");  // falls through to docker's
  }
  {
    ScopedEnv x("XDG_RUNTIME_DIR", env.home.path().string());
    WriteFile(env.home / "containers/auth.json",
              R"({"auths":{"example.com:5000":{"auth":")" + Base64Encode("xdg:pp") + R"("}}})");
    CHECK(FindCredential("example.com:5000", {}).username == "xdg");
  }

  // credHelpers / credsStore run docker-credential-<name> get with the server URL on stdin.
  fs::path bin = env.home / "bin";
  WriteFile(
      bin / "docker-credential-fake",
      "#!/bin/sh\nread url\n[ \"$1\" = get ] || exit 3\n"
      "case \"$url\" in\n"
      "  helped.example) echo '{\"ServerURL\":\"'$url'\",\"Username\":\"helper-user\","
      "\"Secret\":\"helper-secret\"}' ;;\n"
      "  https://index.docker.io/v1/) echo '{\"Username\":\"hub-helper\",\"Secret\":\"x\"}' ;;\n"
      "  *) echo 'credentials not found in native keychain'; exit 1 ;;\n"
      "esac\n");
  fs::permissions(bin / "docker-credential-fake", fs::perms::owner_all);
  ScopedEnv path("PATH", bin.string() + ":" + std::getenv("PATH"));
  WriteFile(docker_config, R"({"credHelpers":{"helped.example":"fake"},"credsStore":"fake"})");
  Credential helped = FindCredential("helped.example", {});
  CHECK(helped.username == "helper-user");
  CHECK(helped.password == "helper-secret");
  CHECK(helped.source == "docker-credential-fake");
  CHECK(FindCredential("docker.io", {}).username == "hub-helper");  // through credsStore
  CHECK(FindCredential("unknown.example", {}).anonymous());         // "not found": anonymous

  WriteFile(docker_config, R"({"credsStore":"missing-helper"})");
  CHECK_THROWS_WITH(FindCredential("x.example", {}),
                    Catch::Contains("docker-credential-missing-helper"));
  WriteFile(docker_config, R"({"auths":{"x.example":{"auth":"!!!"}}})");
  CHECK_THROWS_AS(FindCredential("x.example", {}), util::Fatal);
  WriteFile(docker_config, "{not json");
  CHECK_THROWS_WITH(FindCredential("x.example", {}), Catch::Contains("not JSON"));
}

// ---------------------------------------------------------------------------------------------
// A real registry, on 127.0.0.1.

// The client's waits before retries, recorded instead of slept (the test stays fast, and the
// back-off it checks is exact).
class Waits {
 public:
  RegistryOptions Options(RegistryOptions o = {}) {
    o.sleep = [this](std::chrono::milliseconds d) {
      std::lock_guard lock(mu_);
      ms_.push_back(d.count());
    };
    return o;
  }
  std::vector<int64_t> ms() {
    std::lock_guard lock(mu_);
    return ms_;
  }

 private:
  std::mutex mu_;
  std::vector<int64_t> ms_;
};

// `n` incompressible bytes (xorshift), so a blob holding them can be cut mid-way.
std::string Noise(size_t n) {
  std::string out(n, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (char& c : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x);
  }
  return out;
}

// A two-layer image whose first layer is large and incompressible enough to be cut mid-blob.
ImageRecipe TestRecipe(const std::string& marker = "one") {
  std::string noise = Noise(size_t{600} * 1024);
  ImageRecipe r;
  r.env = {"PATH=/usr/bin", "MARKER=" + marker};
  LayerRecipe first, second;
  first.entries = {Dir("usr"), Dir("usr/lib"), File("usr/lib/noise.bin", noise),
                   File("usr/lib/libx.so.1", "ELF?")};
  first.created_by = "COPY noise";
  second.entries = {File("etc/marker", marker), Whiteout("usr/lib/libx.so.1")};
  second.compression = Compression::kNone;
  second.created_by = "RUN marker";
  r.layers = {first, EmptyLayer("ENV MARKER=" + marker), second};
  return r;
}

std::string ReadWhole(BlobReader& r, size_t chunk = 4096) {
  std::string out, buf(chunk, '\0');
  while (size_t n = r.Read(buf.data(), buf.size())) out.append(buf.data(), n);
  return out;
}

// The stored bytes of `layer` as the registry source of `reference` serves them.
std::string FetchLayer(const std::string& reference, const WrittenLayer& layer,
                       const RegistryOptions& options = {}, size_t chunk = 4096) {
  auto reader =
      OpenRegistry(reference, options)
          ->OpenBlob(
              {layer.media_type, layer.digest, static_cast<int64_t>(layer.compressed_size), {}});
  return ReadWhole(*reader, chunk);
}

// Checks that `src` serves exactly the manifest, config and layers of the layout image.
void ExpectSameImage(Source& src, const fs::path& layout, const WrittenImage& img) {
  Descriptor root = src.Root();
  CHECK(root.digest == img.manifest_digest);
  CHECK(root.media_type == img.manifest_media_type);
  CHECK(root.size == static_cast<int64_t>(img.manifest_size));
  std::string manifest = src.ReadBlob(root, 4 << 20);
  CHECK(manifest == ReadFile(BlobPath(layout, img.manifest_digest)));
  auto m = nlohmann::json::parse(manifest);
  Descriptor config{m["config"]["mediaType"], m["config"]["digest"], m["config"]["size"], {}};
  CHECK(config.digest == img.config_digest);
  CHECK(src.ReadBlob(config, 1 << 20) == ReadFile(BlobPath(layout, img.config_digest)));
  REQUIRE(m["layers"].size() == img.layers.size());
  for (const auto& l : img.layers) {
    Descriptor d{l.media_type, l.digest, static_cast<int64_t>(l.compressed_size), {}};
    auto reader = src.OpenBlob(d);
    std::string bytes = ReadWhole(*reader);
    CHECK(bytes.size() == l.compressed_size);
    CHECK(util::Sha256Digest(bytes) == l.digest);
  }
}

// TestRecipe() in an OCI layout, pushed to a fresh registry as `repo_tag`.
struct PushedImage {
  explicit PushedImage(const std::string& repo_tag, RegistryConfig config = {})
      : img(WriteOciLayout(work / "layout", TestRecipe())), reg(std::move(config)) {
    reg.Push("oci:" + layout().string() + ":latest", repo_tag);
  }
  fs::path layout() const { return work / "layout"; }
  IsolatedAuth env;
  TempDir work;
  WrittenImage img;
  Registry reg;
};

TEST_CASE("registry over TLS with htpasswd serves what skopeo pushed",
          "[registry][docker-registry]") {
  if (!HaveRegistryTools()) return;
  RegistryConfig config;
  config.tls = true;
  config.user = "alice";
  config.password = "wonderland";
  PushedImage pushed("test/img:v1", config);
  auto& [env, work, img, reg] = pushed;
  reg.Push("oci:" + pushed.layout().string() + ":latest", "test/img:v2");

  auto src = OpenRegistry("docker://" + reg.host() + "/test/img:v1", reg.Options());
  CHECK(src->Describe() == "docker://" + reg.host() + "/test/img:v1");
  ExpectSameImage(*src, work / "layout", img);

  SECTION("by digest, with credentials from an auth file and the CA from --cert-dir") {
    fs::path auth = work / "auth.json";
    WriteFile(auth, R"({"auths":{")" + reg.host() + R"(":{"auth":")" +
                        Base64Encode("alice:wonderland") + R"("}}})");
    ScopedEnv a("REGISTRY_AUTH_FILE", auth.string());
    RegistryOptions o;
    o.cert_dir = reg.ca().parent_path().string();
    auto by_digest = OpenRegistry(reg.host() + "/test/img@" + img.manifest_digest, o);
    CHECK(by_digest->Root().digest == img.manifest_digest);
    ExpectSameImage(*by_digest, work / "layout", img);
  }
  SECTION("--tls-verify=false needs no CA") {
    RegistryOptions o = reg.Options();
    o.ca_cert.clear();
    o.tls_verify = false;
    CHECK(OpenRegistry(reg.host() + "/test/img:v1", o)->Root().digest == img.manifest_digest);
  }
  SECTION("an unknown CA is a TLS failure that names the way out") {
    RegistryOptions o = reg.Options();
    o.ca_cert.clear();
    CHECK_THROWS_WITH(OpenRegistry(reg.host() + "/test/img:v1", o),
                      Catch::Contains("TLS failure") && Catch::Contains("--tls-verify=false") &&
                          Catch::Contains("--ca-cert"));
  }
  SECTION("wrong credentials: unauthorized, naming the source but not the secret") {
    RegistryOptions o = reg.Options();
    o.credentials.creds = {"alice:not-the-password"};
    try {
      OpenRegistry(reg.host() + "/test/img:v1", o)->Root();
      FAIL("no error");
    } catch (const util::Fatal& e) {
      std::string m = e.what();
      CHECK(m.find("unauthorized") == 0);
      CHECK(m.find("user 'alice' from --creds") != std::string::npos);
      CHECK(m.find("not-the-password") == std::string::npos);
      CHECK(m.find('\n') == std::string::npos);
    }
    o.credentials.creds.clear();  // and none at all
    CHECK_THROWS_WITH(OpenRegistry(reg.host() + "/test/img:v1", o)->Root(),
                      Catch::StartsWith("unauthorized") && Catch::Contains("no credentials"));
  }
  SECTION("unknown tag lists the tags; unknown repository and digest say so") {
    CHECK_THROWS_WITH(
        OpenRegistry(reg.host() + "/test/img:nope", reg.Options())->Root(),
        Catch::Equals("unknown tag 'nope' in " + reg.host() + "/test/img; it has: v1, v2"));
    CHECK_THROWS_WITH(OpenRegistry(reg.host() + "/test/absent:v1", reg.Options())->Root(),
                      Catch::Equals("unknown repository " + reg.host() + "/test/absent"));
    CHECK_THROWS_WITH(OpenRegistry(reg.host() + "/test/img@" + kDigest, reg.Options())->Root(),
                      Catch::Contains("not found"));
    Descriptor missing{"application/vnd.oci.image.layer.v1.tar+gzip", kDigest, 10, {}};
    CHECK_THROWS_WITH(src->OpenBlob(missing), Catch::Contains("not found"));
    Descriptor hostile{"application/vnd.oci.image.layer.v1.tar", "sha256:../../etc", 10, {}};
    CHECK_THROWS_WITH(src->OpenBlob(hostile), Catch::Contains("bad digest"));
  }
  SECTION("a registry that is down: connection refused") {
    reg.Stop();
    Waits waits;
    CHECK_THROWS_WITH(
        OpenRegistry(reg.host() + "/test/img:v1", waits.Options(reg.Options())),
        Catch::StartsWith("cannot reach " + reg.host()) && Catch::Contains("refused"));
    CHECK(waits.ms() == std::vector<int64_t>{250, 500, 1000, 2000});  // 5 tries, backing off
  }
}

TEST_CASE("registry client certificates come from --cert-dir", "[registry][docker-registry]") {
  if (!HaveRegistryTools()) return;
  RegistryConfig config;
  config.tls = config.client_certs = true;
  PushedImage pushed("mtls:1", config);
  RegistryOptions o;
  o.cert_dir = pushed.reg.cert_dir().string();  // ca.crt, client.cert, client.key
  CHECK(OpenRegistry(pushed.reg.host() + "/mtls:1", o)->Root().digest ==
        pushed.img.manifest_digest);
  o.cert_dir.clear();
  o.ca_cert = pushed.reg.ca().string();  // the CA alone: the registry wants a client certificate
  CHECK_THROWS_WITH(OpenRegistry(pushed.reg.host() + "/mtls:1", o)->Root(),
                    Catch::Contains("TLS failure"));
  fs::remove(pushed.reg.cert_dir() / "client.key");
  o.cert_dir = pushed.reg.cert_dir().string();
  CHECK_THROWS_WITH(OpenRegistry(pushed.reg.host() + "/mtls:1", o),
                    Catch::Contains("has no client.key"));
}

TEST_CASE("registry indexes, Docker media types, and image::Load", "[registry][docker-registry]") {
  if (!HaveRegistryTools()) return;
  IsolatedAuth env;
  TempDir work;
  ImageRecipe amd = TestRecipe("amd"), arm = TestRecipe("arm");
  arm.architecture = "arm64";
  std::vector<WrittenImage> imgs = WriteMultiPlatformLayout(work / "multi", {amd, arm});
  WriteOciLayout(work / "docker", TestRecipe("docker"));
  Registry reg({});
  reg.Push("oci:" + (work / "multi").string() + ":latest", "multi:latest",
           "--all --preserve-digests");
  reg.Push("oci:" + (work / "docker").string() + ":latest", "dock:1", "--format v2s2");

  auto src = OpenRegistry(reg.host() + "/multi", {});  // plain http on a local registry
  Descriptor index = src->Root();
  CHECK(index.media_type == "application/vnd.oci.image.index.v1+json");
  auto j = nlohmann::json::parse(src->ReadBlob(index, 1 << 20));
  REQUIRE(j["manifests"].size() == 2);
  for (size_t i = 0; i < 2; ++i) {  // child manifests come from /manifests/<digest>
    Descriptor child{
        j["manifests"][i]["mediaType"], j["manifests"][i]["digest"], j["manifests"][i]["size"], {}};
    CHECK(child.digest == imgs[i].manifest_digest);
    CHECK(util::Sha256Digest(src->ReadBlob(child, 1 << 20)) == child.digest);
  }
  CHECK_THROWS_WITH(src->ReadBlob(index, 10), Catch::Contains("more than the 10 allowed"));

  // skopeo converted it to Docker schema 2: new digests, so check that every byte matches its own.
  auto dsrc = OpenRegistry("docker://" + reg.host() + "/dock:1", {});
  Descriptor droot = dsrc->Root();
  CHECK(droot.media_type == "application/vnd.docker.distribution.manifest.v2+json");
  std::string dmanifest = dsrc->ReadBlob(droot, 1 << 20);
  CHECK(util::Sha256Digest(dmanifest) == droot.digest);
  auto dm = nlohmann::json::parse(dmanifest);
  CHECK(dm["config"]["mediaType"] == "application/vnd.docker.container.image.v1+json");
  Descriptor dconfig{dm["config"]["mediaType"], dm["config"]["digest"], dm["config"]["size"], {}};
  CHECK(util::Sha256Digest(dsrc->ReadBlob(dconfig, 1 << 20)) == dconfig.digest);
  REQUIRE(dm["layers"].size() == 2);
  for (const auto& l : dm["layers"]) {
    auto reader = dsrc->OpenBlob({l["mediaType"], l["digest"], l["size"], {}});
    std::string bytes = ReadWhole(*reader);
    CHECK(bytes.size() == l["size"].get<size_t>());
    CHECK(util::Sha256Digest(bytes) == l["digest"]);
  }

  // The whole pipeline: the same merged tree as from the OCI layout.
  LoadOptions lo;
  lo.platform = "linux/arm64";
  Image from_registry = Load("docker://" + reg.host() + "/multi:latest", lo);
  Image from_layout = Load("oci:" + (work / "multi").string() + ":latest", lo);
  CHECK(from_registry.transport == "docker");
  CHECK(from_registry.manifest_digest == imgs[1].manifest_digest);
  CHECK(from_registry.config_digest == from_layout.config_digest);
  CHECK(from_registry.config.env == from_layout.config.env);
  REQUIRE(from_registry.layers.size() == from_layout.layers.size());
  for (size_t i = 0; i < from_layout.layers.size(); ++i) {
    CHECK(from_registry.layers[i].digest == from_layout.layers[i].digest);
    CHECK(from_registry.layers[i].diff_id == from_layout.layers[i].diff_id);
  }
  const auto& a = from_registry.tree.nodes();
  const auto& b = from_layout.tree.nodes();
  REQUIRE(a.size() == b.size());
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    CHECK(ia->first == ib->first);
    CHECK(ia->second.type == ib->second.type);
    CHECK(ia->second.size == ib->second.size);
    CHECK(ia->second.layer == ib->second.layer);
    CHECK(ia->second.link_target == ib->second.link_target);
  }
  CHECK(from_registry.tree.Find("/etc/marker") != nullptr);
  CHECK(from_registry.tree.Find("/usr/lib/libx.so.1") == nullptr);  // whited out
  CHECK(from_registry.tree.deleted().size() == from_layout.tree.deleted().size());
}

TEST_CASE("a blob tampered on the registry's disk is delivered as stored, and Load rejects it",
          "[registry][docker-registry]") {
  if (!HaveRegistryTools()) return;
  PushedImage pushed("t:1");
  Registry& reg = pushed.reg;
  const WrittenLayer& layer = pushed.img.layers[0];
  fs::path data = reg.BlobFile(layer.digest);
  REQUIRE(fs::exists(data));
  std::string bytes = ReadFile(data);
  bytes[bytes.size() / 2] ^= 0x55;
  WriteFile(data, bytes);

  std::string got = FetchLayer(reg.host() + "/t:1", layer);
  CHECK(got == bytes);
  CHECK(util::Sha256Digest(got) != layer.digest);
  CHECK_THROWS_WITH(Load(reg.host() + "/t:1", {}), Catch::Contains(layer.digest.substr(0, 19)));
}

// ---------------------------------------------------------------------------------------------
// A proxy in front of the registry that misbehaves on purpose.

struct ProxyRules {
  size_t cut_first_blob_after = 0;    ///< close the first blob answer after this many body bytes
  bool blobs_gone_after_cut = false;  ///< then close every later blob answer before its body
  int manifest_errors = 0;            ///< answer this many manifest requests with `error_status`
  std::string error_status = "429 Too Many Requests";
  std::string retry_after = "1";
  bool schema1 = false;                    ///< answer manifest requests with a schema 1 manifest
  bool bearer = false;                     ///< require "Bearer <token>" and serve /token
  std::string token_user, token_password;  ///< basic auth the token service wants, if any
  bool redirect_blobs = false;  ///< 307 blob requests to http://localhost:<port>/storage/...
};

struct Seen {
  std::string method, target;
  std::map<std::string, std::string> headers;  ///< lower-case names
};

// An HTTP/1.1 server on a loopback port: one request per connection, answered by `handler`
// (which writes the whole response to the socket), every request recorded.
class LoopbackServer {
 public:
  using Handler = std::function<void(int fd, Seen& request)>;
  explicit LoopbackServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    REQUIRE(listen(listen_fd_, 64) == 0);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~LoopbackServer() {
    stop_ = true;
    acceptor_.join();
    for (auto& t : handlers_) t.join();
    close(listen_fd_);
  }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  int port() const { return port_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string url() const { return "http://" + host(); }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

  static bool SendAll(int fd, std::string_view s) {
    while (!s.empty()) {
      ssize_t n = send(fd, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  static void Reply(int fd, const std::string& status, const std::string& headers,
                    const std::string& body) {
    SendAll(fd, "HTTP/1.1 " + status + "\r\n" + headers + "Content-Length: " +
                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  }

 private:
  void Accept() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      handlers_.emplace_back([this, fd] {
        Seen s;
        if (ReadRequest(fd, s)) {
          {
            std::lock_guard lock(mu_);
            seen_.push_back(s);
          }
          handler_(fd, s);
        }
        close(fd);
      });
    }
  }

  static bool ReadRequest(int fd, Seen& s) {
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string req;
    char buf[8192];
    while (req.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      req.append(buf, static_cast<size_t>(n));
      if (req[0] == 0x16) {  // a TLS ClientHello: answer as Go's http server does
        SendAll(
            fd,
            "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n");
        return false;
      }
    }
    std::string head = req.substr(0, req.find("\r\n\r\n"));
    size_t eol = head.find("\r\n");
    std::string line = head.substr(0, eol);
    s.method = line.substr(0, line.find(' '));
    s.target = line.substr(s.method.size() + 1, line.rfind(' ') - s.method.size() - 1);
    for (size_t p = eol; p != std::string::npos && p + 2 < head.size();) {
      size_t next = head.find("\r\n", p + 2);
      std::string h =
          head.substr(p + 2, next == std::string::npos ? std::string::npos : next - p - 2);
      size_t colon = h.find(':');
      std::string name = h.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      s.headers[name] = h.substr(h.find_first_not_of(' ', colon + 1));
      p = next;
    }
    return true;
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> handlers_;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

class Proxy {
 public:
  static constexpr const char* kToken = "tok-imgcheck-123";

  Proxy(int upstream, ProxyRules rules)
      : upstream_(upstream),
        rules_(std::move(rules)),
        server_([this](int fd, Seen& s) { Handle(fd, s); }) {}

  std::string host() const { return server_.host(); }
  std::vector<Seen> seen() { return server_.seen(); }
  int token_requests() const { return token_requests_; }

 private:
  static void Reply(int fd, const std::string& status, const std::string& headers,
                    const std::string& body) {
    LoopbackServer::Reply(fd, status, headers, body);
  }
  static bool SendAll(int fd, std::string_view s) { return LoopbackServer::SendAll(fd, s); }

  void Handle(int fd, Seen& s) {
    char buf[8192];
    std::string auth = s.headers.count("authorization") ? s.headers["authorization"] : "";
    if (s.target.starts_with("/token")) {
      ++token_requests_;
      std::string want = "Basic " + Base64Encode(rules_.token_user + ":" + rules_.token_password);
      bool scope_ok = s.target.find("scope=repository%3Atest%2Fimg%3Apull") != std::string::npos &&
                      s.target.find("service=imgcheck-test") != std::string::npos;
      if (!scope_ok || (!rules_.token_user.empty() && auth != want)) {
        Reply(fd, "401 Unauthorized", "", R"({"details":"bad credentials"})");
      } else {
        Reply(fd, "200 OK", "Content-Type: application/json\r\n",
              std::string(R"({"token":")") + kToken + R"(","expires_in":300})");
      }
      return;
    }
    bool storage = s.target.starts_with("/storage/");
    std::string upstream_target = storage ? s.target.substr(8) : s.target;
    if (rules_.bearer && !storage && auth != std::string("Bearer ") + kToken) {
      Reply(fd, "401 Unauthorized",
            "WWW-Authenticate: Bearer realm=\"http://" + host() +
                "/token\",service=\"imgcheck-test\",scope=\"repository:test/img:pull\"\r\n",
            R"({"errors":[{"code":"UNAUTHORIZED","message":"token needed"}]})");
      return;
    }
    bool blob = s.method == "GET" && upstream_target.find("/blobs/") != std::string::npos;
    if (blob && rules_.redirect_blobs && !storage) {
      Reply(fd, "307 Temporary Redirect",
            "Location: http://localhost:" + std::to_string(server_.port()) + "/storage" + s.target +
                "\r\n",
            "");
      return;
    }
    bool manifest = s.target.find("/manifests/") != std::string::npos;
    if (manifest && manifest_errors_ < rules_.manifest_errors) {
      ++manifest_errors_;
      Reply(fd, rules_.error_status, "Retry-After: " + rules_.retry_after + "\r\n",
            R"({"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]})");
      return;
    }
    if (manifest && rules_.schema1) {
      Reply(fd, "200 OK",
            "Content-Type: application/vnd.docker.distribution.manifest.v1+prettyjws\r\n",
            R"({"schemaVersion":1,"name":"test/img","tag":"v1","fsLayers":[],"history":[]})");
      return;
    }
    // Forward, one request per connection.
    int up = ConnectLoopback(upstream_);
    if (up < 0) return;
    std::string fwd = s.method + " " + upstream_target + " HTTP/1.1\r\n";
    for (const auto& [name, value] : s.headers) {
      if (name != "authorization" && name != "connection") fwd += name + ": " + value + "\r\n";
    }
    fwd += "Connection: close\r\n\r\n";
    SendAll(up, fwd);
    std::string resp;
    while (true) {
      ssize_t n = recv(up, buf, sizeof buf, 0);
      if (n <= 0) break;
      resp.append(buf, static_cast<size_t>(n));
    }
    close(up);
    if (blob && rules_.cut_first_blob_after > 0 && !cut_done_.exchange(true)) {
      size_t body = resp.find("\r\n\r\n") + 4;
      resp.resize(std::min(resp.size(), body + rules_.cut_first_blob_after));
    } else if (blob && rules_.blobs_gone_after_cut && cut_done_) {
      resp.resize(resp.find("\r\n\r\n") + 4);  // the headers, then the connection drops
    }
    SendAll(fd, resp);
  }

  int upstream_;
  ProxyRules rules_;
  std::atomic<bool> cut_done_{false};
  std::atomic<int> token_requests_{0};
  int manifest_errors_ = 0;
  LoopbackServer server_;  // last: its threads call Handle, which uses the members above
};

TEST_CASE("a manifest resolved before is fetched once: the load starts from its bytes",
          "[registry][docker-registry]") {
  if (!HaveRegistryTools()) return;
  PushedImage pushed("test/img:v1");
  Proxy proxy(pushed.reg.port(), {});
  auto manifest_gets = [&proxy] {
    int n = 0;
    for (const Seen& s : proxy.seen())
      n += s.method == "GET" && s.target.find("/manifests/") != std::string::npos ? 1 : 0;
    return n;
  };
  LoadOptions o;
  KnownManifest known = ResolveRegistryManifest("docker://" + proxy.host() + "/test/img:v1", o);
  CHECK(known.digest == pushed.img.manifest_digest);
  CHECK(util::Sha256Digest(known.bytes) == known.digest);
  CHECK(manifest_gets() == 1);

  // What serve does: the scan of the pinned reference is handed the resolver's manifest.
  std::string pinned = "docker://" + proxy.host() + "/test/img@" + known.digest;
  o.known_manifest = std::make_shared<KnownManifest>(known);
  Image image = Load(pinned, o);
  CHECK(image.manifest_digest == known.digest);
  CHECK(image.tree.Find("/etc/marker") != nullptr);
  CHECK(manifest_gets() == 1);

  // Without them the load fetches the manifest itself.
  o.known_manifest = nullptr;
  CHECK(Load(pinned, o).manifest_digest == known.digest);
  CHECK(manifest_gets() == 2);

  // Bytes that are not the digest's are refused, not trusted.
  auto forged = std::make_shared<KnownManifest>(known);
  forged->bytes.back() = forged->bytes.back() == '}' ? ' ' : '}';
  o.known_manifest = forged;
  CHECK_THROWS_WITH(Load(pinned, o), Catch::Contains("digest mismatch"));
}

TEST_CASE("registry transport survives cuts, 429s, redirects, and does the token flow",
          "[registry][docker-registry]") {
  if (!HaveRegistryTools()) return;
  PushedImage pushed("test/img:v1");
  auto& [env, work, img, reg] = pushed;
  const WrittenLayer& big = img.layers[0];
  REQUIRE(big.compressed_size > 300000);

  SECTION("a connection cut mid-blob resumes with a Range request") {
    ProxyRules rules;
    rules.cut_first_blob_after = 100000;
    Proxy proxy(reg.port(), rules);
    Waits waits;
    std::string bytes = FetchLayer(proxy.host() + "/test/img:v1", big, waits.Options(), 65536);
    CHECK(waits.ms() == std::vector<int64_t>{250});
    CHECK(bytes.size() == big.compressed_size);
    CHECK(util::Sha256Digest(bytes) == big.digest);
    int ranged = 0;
    for (const auto& s : proxy.seen()) {
      if (s.headers.count("range")) {
        ++ranged;
        CHECK(s.headers.at("range") == "bytes=100000-");
      }
    }
    CHECK(ranged == 1);
  }
  SECTION("429 with Retry-After is waited out, and a lasting one is reported") {
    ProxyRules once;
    once.manifest_errors = 1;
    Proxy proxy(reg.port(), once);
    Waits waits;
    auto src = OpenRegistry(proxy.host() + "/test/img:v1", waits.Options());
    CHECK(src->Root().digest == img.manifest_digest);
    CHECK(waits.ms() == std::vector<int64_t>{1000});  // Retry-After: 1, over the first back-off

    ProxyRules lasting;
    lasting.manifest_errors = 1000;
    lasting.retry_after = "0";
    Proxy always(reg.port(), lasting);
    Waits always_waits;
    CHECK_THROWS_WITH(OpenRegistry(always.host() + "/test/img:v1", always_waits.Options())->Root(),
                      Catch::StartsWith("rate limited by " + always.host()));
    CHECK(always_waits.ms() == std::vector<int64_t>{250, 500, 1000, 2000});
    lasting.retry_after = "3600";  // too long to wait: said at once
    Proxy hour(reg.port(), lasting);
    Waits hour_waits;
    CHECK_THROWS_WITH(OpenRegistry(hour.host() + "/test/img:v1", hour_waits.Options())->Root(),
                      Catch::Contains("retry after 3600 s"));
    CHECK(hour_waits.ms().empty());
  }
  SECTION("a 503 is retried; a schema 1 manifest is refused with a clear message") {
    ProxyRules unavailable;
    unavailable.manifest_errors = 2;
    unavailable.error_status = "503 Service Unavailable";
    unavailable.retry_after = "";
    Proxy proxy(reg.port(), unavailable);
    Waits waits;
    CHECK(OpenRegistry(proxy.host() + "/test/img:v1", waits.Options())->Root().digest ==
          img.manifest_digest);
    CHECK(waits.ms() == std::vector<int64_t>{250, 500});

    ProxyRules old_format;
    old_format.schema1 = true;
    Proxy schema1(reg.port(), old_format);
    CHECK_THROWS_WITH(OpenRegistry(schema1.host() + "/test/img:v1", {})->Root(),
                      Catch::Contains("schema 1 manifest"));
  }
  SECTION("bearer tokens from the realm, cached; blobs redirected without the token") {
    ProxyRules rules;
    rules.bearer = true;
    rules.token_user = "tess";
    rules.token_password = "t0ken-pass";
    rules.redirect_blobs = true;
    Proxy proxy(reg.port(), rules);
    RegistryOptions o;
    o.credentials.creds = {"tess:t0ken-pass"};
    auto src = OpenRegistry(proxy.host() + "/test/img:v1", o);
    ExpectSameImage(*src, work / "layout", img);
    CHECK(proxy.token_requests() == 1);
    auto again = OpenRegistry("docker://" + proxy.host() + "/test/img:v1", o);
    CHECK(again->Root().digest == img.manifest_digest);
    CHECK(proxy.token_requests() == 1);  // the token is cached for the process
    LoadOptions lo;
    lo.registry = o;
    lo.jobs = 3;  // layers read on several threads through one source
    Image loaded = Load(proxy.host() + "/test/img:v1", lo);
    REQUIRE(loaded.layers.size() == img.layers.size());
    for (size_t i = 0; i < img.layers.size(); ++i) {
      CHECK(loaded.layers[i].diff_id == img.layers[i].diff_id);
    }
    int storage = 0;
    for (auto& s : proxy.seen()) {
      if (s.target.starts_with("/storage/")) {
        ++storage;
        CHECK(s.headers.count("authorization") == 0);
      } else if (s.target.starts_with("/v2/test/")) {
        CHECK(s.headers["authorization"] == std::string("Bearer ") + Proxy::kToken);
      }
    }
    // Read twice (ExpectSameImage, Load): the layers and the config.
    CHECK(storage == 2 * (static_cast<int>(img.layers.size()) + 1));

    o.credentials.creds = {"tess:wrong"};
    try {
      OpenRegistry(proxy.host() + "/test/img:v1", o)->Root();
      FAIL("no error");
    } catch (const util::Fatal& e) {
      CHECK_THAT(e.what(), Catch::StartsWith("unauthorized: the token service") &&
                               Catch::Contains("user 'tess' from --creds"));
      CHECK(std::string(e.what()).find("wrong") == std::string::npos);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Credentials and redirects (README "Credentials and redirects"), against registries played by
// loopback servers: each port is its own origin.

// A registry that wants Basic "reg-user:reg-pass" (or, with `bearer`, a token from its realm
// at /token, which itself wants that Basic credential), serving one manifest and one blob; and
// `redirect` sends the named requests ("token", "manifest", "blob") to `elsewhere`.
struct FakeRegistry {
  static constexpr const char* kManifest = R"({"schemaVersion":2,"layers":[]})";
  static constexpr const char* kBlob = "blob-bytes";
  bool bearer = false;
  std::set<std::string> redirect;
  std::string elsewhere;
  std::string basic = "Basic " + Base64Encode("reg-user:reg-pass");
  LoopbackServer server{[this](int fd, Seen& s) { Handle(fd, s); }};

  void Handle(int fd, Seen& s) {
    std::string auth = s.headers.count("authorization") ? s.headers["authorization"] : "";
    auto moved = [&](const std::string& what) {
      if (!redirect.count(what)) return false;
      LoopbackServer::Reply(fd, "302 Found", "Location: " + elsewhere + s.target + "\r\n", "");
      return true;
    };
    if (s.target.starts_with("/token")) {
      if (moved("token")) return;
      if (auth != basic) return LoopbackServer::Reply(fd, "401 Unauthorized", "", "{}");
      return LoopbackServer::Reply(fd, "200 OK", "", R"({"token":"good-token"})");
    }
    if (auth != (bearer ? "Bearer good-token" : basic)) {
      std::string challenge = bearer ? "Bearer realm=\"" + server.url() + "/token\",service=\"t\""
                                     : "Basic realm=\"fake\"";
      return LoopbackServer::Reply(fd, "401 Unauthorized",
                                   "WWW-Authenticate: " + challenge + "\r\n", "");
    }
    if (s.target == "/v2/") return LoopbackServer::Reply(fd, "200 OK", "", "{}");
    if (s.target.find("/manifests/") != std::string::npos) {
      if (moved("manifest")) return;
      return LoopbackServer::Reply(
          fd, "200 OK", "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n", kManifest);
    }
    if (s.target.find("/blobs/") != std::string::npos) {
      if (moved("blob")) return;
      return LoopbackServer::Reply(fd, "200 OK", "", kBlob);
    }
    LoopbackServer::Reply(fd, "404 Not Found", "", "{}");
  }
};

// A third origin: answers every request as the registry would (a token, the manifest, the
// blob), so that a client that follows it goes on, and records what it was sent.
struct ThirdOrigin {
  LoopbackServer server{[](int fd, Seen& s) {
    if (s.target.starts_with("/token")) {
      return LoopbackServer::Reply(fd, "200 OK", "", R"({"token":"good-token"})");
    }
    bool manifest = s.target.find("/manifests/") != std::string::npos;
    LoopbackServer::Reply(
        fd, "200 OK",
        manifest ? "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n" : "",
        manifest ? FakeRegistry::kManifest : FakeRegistry::kBlob);
  }};
  /// Requests that carried an Authorization header.
  int authorized() {
    int n = 0;
    for (const auto& s : server.seen()) n += s.headers.count("authorization") ? 1 : 0;
    return n;
  }
};

RegistryOptions CredsFor(const FakeRegistry& reg, std::vector<std::string> more = {}) {
  RegistryOptions o;
  o.credentials.creds = {reg.server.host() + "=reg-user:reg-pass"};
  for (auto& m : more) o.credentials.creds.push_back(std::move(m));
  o.sleep = [](std::chrono::milliseconds) {};
  o.deadline_s = 20;
  return o;
}

const Descriptor kFakeBlob{"application/vnd.oci.image.layer.v1.tar", kDigest, 10, {}};

// A fake registry (bearer tokens when `bearer`) that redirects the requests named in `what`
// ("token", "manifest", "blob") to a third origin, with no credential of the caller's around.
struct Redirecting {
  Redirecting(std::set<std::string> what, bool bearer) {
    reg.bearer = bearer;
    reg.redirect = std::move(what);
    reg.elsewhere = third.server.url();
  }
  IsolatedAuth env;
  ThirdOrigin third;
  FakeRegistry reg;
};

TEST_CASE("a token realm's redirect to another origin gets no credential", "[registry]") {
  Redirecting fake({"token"}, true);
  ThirdOrigin& third = fake.third;
  FakeRegistry& reg = fake.reg;
  // scan (no allow-list): the redirect is followed, the Basic credential stays behind.
  auto src = OpenRegistry(reg.server.host() + "/test/img:v1", CredsFor(reg));
  CHECK(src->Root().digest == util::Sha256Digest(FakeRegistry::kManifest));
  REQUIRE(third.server.seen().size() == 1);
  CHECK(third.server.seen()[0].target.starts_with("/token"));
  CHECK(third.authorized() == 0);
  int basic_to_realm = 0;
  for (const auto& s : reg.server.seen())
    if (s.target.starts_with("/token") && s.headers.count("authorization")) ++basic_to_realm;
  CHECK(basic_to_realm >= 1);  // the realm the registry named did get it

  // serve (--allow-registry): a token redirect off the allow-list is refused.
  FakeRegistry other;
  other.bearer = true;
  other.redirect = {"token"};
  other.elsewhere = third.server.url();
  RegistryOptions o = CredsFor(other);
  o.allow_registries = {other.server.host()};
  try {
    OpenRegistry(other.server.host() + "/test/img:v1", o)->Root();
    FAIL("no error");
  } catch (const util::Fatal& e) {
    CHECK_THAT(e.what(), Catch::Contains("redirected a token request to " + third.server.url() +
                                         ", which is not in --allow-registry"));
  }
  CHECK(third.server.seen().size() == 1);  // nothing more reached it
}

TEST_CASE("manifest redirects leave credentials behind, and off the allow-list are refused",
          "[registry]") {
  Redirecting fake({"manifest"}, false);
  ThirdOrigin& third = fake.third;
  FakeRegistry& reg = fake.reg;
  CHECK(OpenRegistry(reg.server.host() + "/test/img:v1", CredsFor(reg))->Root().size > 0);
  CHECK(third.server.seen().size() == 1);
  CHECK(third.authorized() == 0);

  RegistryOptions o = CredsFor(reg);
  o.allow_registries = {reg.server.host()};
  CHECK_THROWS_WITH(OpenRegistry(reg.server.host() + "/test/img:v1", o)->Root(),
                    Catch::Contains("which is not in --allow-registry"));
  CHECK(third.server.seen().size() == 1);
  // An allowed second registry may be redirected to, still without the first one's credential.
  o.allow_registries.push_back(third.server.host());
  CHECK(OpenRegistry(reg.server.host() + "/test/img:v1", o)->Root().size > 0);
  CHECK(third.server.seen().size() == 2);
  CHECK(third.authorized() == 0);
}

TEST_CASE("blob redirects: anywhere without credentials, or only to --allow-blob-host",
          "[registry]") {
  Redirecting fake({"blob"}, true);
  ThirdOrigin& third = fake.third;
  FakeRegistry& reg = fake.reg;
  auto read_blob = [&](const RegistryOptions& o) {
    auto reader = OpenRegistry(reg.server.host() + "/test/img:v1", o)->OpenBlob(kFakeBlob);
    return ReadWhole(*reader, 4096);
  };
  CHECK(read_blob(CredsFor(reg)) == FakeRegistry::kBlob);  // scan: object stores, CDNs
  CHECK(third.server.seen().size() == 1);
  CHECK(third.authorized() == 0);

  RegistryOptions o = CredsFor(reg);
  o.allow_registries = {reg.server.host()};  // serve with an allow-list: same origin only
  CHECK_THROWS_WITH(read_blob(o),
                    Catch::Contains("redirected a blob request to " + third.server.url() +
                                    ", which is neither the registry nor an "
                                    "--allow-blob-host"));
  o.allow_registries.clear();
  o.allow_blob_hosts = {"127.0.0.1:1"};  // a list that does not name it: refused too
  CHECK_THROWS_WITH(read_blob(o), Catch::Contains("--allow-blob-host"));
  CHECK(third.server.seen().size() == 1);
  o.allow_registries = {reg.server.host()};
  o.allow_blob_hosts = {third.server.host()};
  CHECK(read_blob(o) == FakeRegistry::kBlob);
  CHECK(third.server.seen().size() == 2);
  CHECK(third.authorized() == 0);
}

TEST_CASE("a credential is offered only to the registry it names", "[registry]") {
  IsolatedAuth env;
  FakeRegistry mine, theirs;
  // `theirs` is asked with only `mine`'s credential: it gets none, and says unauthorized.
  RegistryOptions o = CredsFor(mine);
  CHECK_THROWS_WITH(OpenRegistry(theirs.server.host() + "/test/img:v1", o)->Root(),
                    Catch::StartsWith("unauthorized"));
  for (const auto& s : theirs.server.seen()) CHECK(s.headers.count("authorization") == 0);
  CHECK(OpenRegistry(mine.server.host() + "/test/img:v1", o)->Root().size > 0);

  // Two registries, two credentials: each gets its own.
  RegistryOptions both = CredsFor(mine, {theirs.server.host() + "=other-user:other-pass"});
  theirs.basic = "Basic " + Base64Encode("other-user:other-pass");
  CHECK(OpenRegistry(theirs.server.host() + "/test/img:v1", both)->Root().size > 0);
  CHECK(OpenRegistry(mine.server.host() + "/test/img:v1", both)->Root().size > 0);

  // Parsing: HOST=USER:PASS (Docker Hub's aliases are docker.io), a bare USER:PASS.
  CHECK(ParseCredsFlag("index.docker.io=u:p").domain == "docker.io");
  CHECK(ParseCredsFlag("Quay.IO=u:p=q").credential.password == "p=q");
  CHECK(ParseCredsFlag("Quay.IO=u:p").domain == "quay.io");
  CHECK(ParseCredsFlag("localhost:5000=u:p").domain == "localhost:5000");
  CHECK(ParseCredsFlag("u:pa=ss").domain.empty());
  CHECK(ParseCredsFlag("u:pa=ss").credential.password == "pa=ss");
  CHECK_THROWS_WITH(ParseCredsFlag("quay.io=nocolon"),
                    "--creds must be HOST=USER:PASS or USER:PASS");
  CHECK(FindCredential("docker.io", {{"registry-1.docker.io=hub:x"}, ""}).username == "hub");
  CHECK(FindCredential("quay.io", {{"docker.io=hub:x"}, ""}).anonymous());

  // --authfile: that file only, by registry.
  fs::path file = env.home / "serve-auth.json";
  WriteFile(file, R"({"auths":{"quay.io":{"auth":")" + Base64Encode("q:qq") + R"("}}})");
  CHECK(FindCredential("quay.io", {{}, file.string()}).username == "q");
  CHECK(FindCredential("ghcr.io", {{}, file.string()}).anonymous());
  CHECK_THROWS_WITH(FindCredential("ghcr.io", {{}, (env.home / "none.json").string()}),
                    Catch::StartsWith("cannot read --authfile"));
}

// Artifacts (imgcheck's rule data): pushed with imgcheck's own PUT client, read back by skopeo.

constexpr ArtifactTypes kTestArtifact{"application/vnd.example.test.v1",
                                      "application/vnd.example.test.config.v1+json",
                                      "application/vnd.example.test.layer.v1.tar+gzip"};

TEST_CASE("artifacts pushed to a registry are what skopeo reads, and pulls verify them",
          "[registry][docker-registry][artifact]") {
  if (!HaveRegistryTools()) return;
  Registry reg({});
  TempDir work;
  std::string config = R"({"schema":1,"date":"2026-11-23"})";
  std::string layer = PackFiles({{"a.json", "{}"}, {"noise.json", Noise(200000)}});
  std::string ref = reg.host() + "/imgcheck/rules:1";
  std::string digest = PushArtifact(ref, kTestArtifact, config, layer);
  CHECK(PushArtifact("docker://" + ref, kTestArtifact, config, layer) == digest);  // blobs kept

  // skopeo, the independent reader: the manifest by digest, and every blob into a layout.
  CommandResult raw = Run("skopeo inspect --raw --tls-verify=false docker://" + ref + " > " +
                          (work / "manifest").string());
  INFO(raw.output);
  REQUIRE(raw.status == 0);
  CHECK(util::Sha256Digest(ReadFile(work / "manifest")) == digest);
  auto manifest = nlohmann::json::parse(ReadFile(work / "manifest"));
  CHECK(manifest["artifactType"] == kTestArtifact.artifact);
  CHECK(manifest["config"]["mediaType"] == kTestArtifact.config);
  fs::path copy = work / "copy";
  CommandResult cp = Run("skopeo --insecure-policy copy -q --src-tls-verify=false docker://" + ref +
                         " oci:" + copy.string() + ":1 2>&1");
  INFO(cp.output);
  REQUIRE(cp.status == 0);
  CHECK(ReadFile(BlobPath(copy, util::Sha256Digest(layer))) == layer);
  CHECK(ReadFile(BlobPath(copy, util::Sha256Digest(config))) == config);

  Artifact a = PullArtifact(ref, kTestArtifact, 1 << 20);
  CHECK(a.manifest_digest == digest);
  CHECK(a.layer == layer);
  CHECK(PullArtifact("oci:" + copy.string() + ":1", kTestArtifact, 1 << 20).layer == layer);

  SECTION("a tampered blob is refused") {
    fs::path data = reg.BlobFile(util::Sha256Digest(layer));
    std::string bytes = ReadFile(data);
    bytes[bytes.size() / 3] ^= 0x55;
    WriteFile(data, bytes);
    CHECK_THROWS_WITH(PullArtifact(ref, kTestArtifact, 1 << 20),
                      Catch::Contains("does not match its digest"));
  }
  SECTION("a download that breaks and cannot resume is refused, in one line") {
    ProxyRules rules;
    rules.cut_first_blob_after = 50000;
    rules.blobs_gone_after_cut = true;
    Proxy proxy(reg.port(), rules);
    Waits waits;
    try {
      PullArtifact(proxy.host() + "/imgcheck/rules:1", kTestArtifact, 1 << 20, waits.Options());
      FAIL("no error");
    } catch (const util::Fatal& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      CHECK_FALSE(waits.ms().empty());  // it did try again
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The referrers API, page by page (distribution-spec 1.1 "Listing Referrers"), against a
// registry played by a loopback server whose pages link on as `link` says.

struct PagedReferrers {
  static constexpr const char* kSubject =
      "sha256:5555555555555555555555555555555555555555555555555555555555555555";
  /// The Link header of page `n` (1-based; the first page is asked for without ?page=); "" ends.
  std::function<std::string(int n)> link;
  size_t padding = 0;  ///< bytes of annotation in each page's manifest entry
  std::atomic<int> pages{0};
  LoopbackServer server{[this](int fd, Seen& s) {
    if (s.target == "/v2/") return LoopbackServer::Reply(fd, "200 OK", "", "{}");
    std::string base = std::string("/v2/app/referrers/") + kSubject;
    if (!s.target.starts_with(base)) return LoopbackServer::Reply(fd, "404 Not Found", "", "{}");
    size_t at = s.target.find("page=");
    int n = at == std::string::npos ? 1 : std::atoi(s.target.c_str() + at + 5);
    ++pages;
    std::string digest = "sha256:" + std::string(60, '0') + std::to_string(1000 + n);
    nlohmann::json index = {{"schemaVersion", 2},
                            {"mediaType", "application/vnd.oci.image.index.v1+json"},
                            {"manifests",
                             {{{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                               {"digest", digest},
                               {"size", 100},
                               {"artifactType", "application/vnd.dev.sigstore.bundle.v0.3+json"},
                               {"annotations", {{"pad", std::string(padding, 'p')}}}}}}};
    std::string l = link(n);
    LoopbackServer::Reply(fd, "200 OK",
                          "Content-Type: application/vnd.oci.image.index.v1+json\r\n" +
                              (l.empty() ? "" : "Link: " + l + "\r\n"),
                          index.dump());
  }};
  std::string Page(int n) const {
    return std::string("</v2/app/referrers/") + kSubject + "?page=" + std::to_string(n) +
           ">; rel=\"next\"";
  }
  std::optional<std::string> Get(uint64_t limit = 1 << 20) {
    RegistryOptions o;
    o.sleep = [](std::chrono::milliseconds) {};
    o.deadline_s = 20;
    Repository repo(server.host() + "/app:x", o);
    return repo.GetReferrers(kSubject, "application/vnd.dev.sigstore.bundle.v0.3+json", limit);
  }
};

TEST_CASE("the referrers API is read page by page through its Link header, bounded", "[registry]") {
  IsolatedAuth env;
  PagedReferrers reg;
  auto digests = [](const std::string& body) {
    std::vector<std::string> out;
    nlohmann::json index = nlohmann::json::parse(body);
    for (const auto& m : index["manifests"]) out.push_back(m["digest"]);
    return out;
  };
  auto suffix = [](int n) { return "sha256:" + std::string(60, '0') + std::to_string(1000 + n); };

  SECTION("three pages: every page's manifests, in order, as one index") {
    reg.link = [&](int n) { return n < 3 ? reg.Page(n + 1) : std::string(); };
    auto body = reg.Get();
    REQUIRE(body);
    CHECK(digests(*body) == std::vector<std::string>{suffix(1), suffix(2), suffix(3)});
    CHECK(nlohmann::json::parse(*body)["mediaType"] == "application/vnd.oci.image.index.v1+json");
    CHECK(reg.pages == 3);
  }
  SECTION("one page without a Link: that page only") {
    reg.link = [](int) { return std::string(); };
    auto body = reg.Get();
    REQUIRE(body);
    CHECK(digests(*body) == std::vector<std::string>{suffix(1)});
    CHECK(reg.pages == 1);
  }
  SECTION("a next page on another host is refused, and never asked for") {
    LoopbackServer elsewhere([](int fd, Seen&) { LoopbackServer::Reply(fd, "200 OK", "", "{}"); });
    reg.link = [&](int) {
      return "<" + elsewhere.url() + "/v2/app/referrers/" + PagedReferrers::kSubject +
             "?page=2>; rel=\"next\"";
    };
    CHECK_THROWS_WITH(reg.Get(), Catch::Contains("another host") && !Catch::Contains("\n"));
    CHECK(elsewhere.seen().empty());
  }
  SECTION("a next page that is another endpoint is refused") {
    reg.link = [](int) { return std::string("</v2/app/manifests/latest>; rel=\"next\""); };
    CHECK_THROWS_WITH(reg.Get(), Catch::Contains("another listing"));
  }
  SECTION("pages that loop end in an error at the first page seen again") {
    reg.link = [&](int n) { return reg.Page(n == 3 ? 2 : n + 1); };
    CHECK_THROWS_WITH(reg.Get(), Catch::Contains("its pages loop"));
    CHECK(reg.pages == 3);
  }
  SECTION("endless pages end at the bound") {
    reg.link = [&](int n) { return reg.Page(n + 1); };
    CHECK_THROWS_WITH(reg.Get(),
                      Catch::Contains("more than " + std::to_string(kMaxReferrerPages) + " pages"));
    CHECK(reg.pages == static_cast<int>(kMaxReferrerPages));
  }
  SECTION("the bound in bytes holds for all pages together") {
    reg.padding = 3000;
    reg.link = [&](int n) { return reg.Page(n + 1); };
    CHECK_THROWS_WITH(reg.Get(8000), Catch::Contains("larger than 8000 bytes"));
    CHECK(reg.pages == 3);  // 3.3 KB a page: the third one passes the bound
  }
}

TEST_CASE("a connection share keeps a registry's connections warm across exchanges",
          "[registry][docker-registry]") {
  if (!HaveRegistryTools()) return;
  RegistryConfig config;
  config.tls = true;
  Registry reg(config);
  TlsOptions tls;
  tls.ca_pem = ReadFile(reg.ca());
  const std::string url = "https://" + reg.host() + "/v2/";
  // The connections each of three exchanges opened, one after the other.
  auto connections = [&](ConnectionShare* share) {
    std::vector<long> opened;
    for (int i = 0; i < 3; ++i) {
      HttpExchange ex({"GET", url, {}, {}}, tls, "", {}, share);
      REQUIRE(ex.WaitHeaders());
      CHECK(ex.status() == 200);
      std::string body;
      CHECK(ex.ReadAll(body, 1 << 16));
      opened.push_back(ex.new_connections());
    }
    return opened;
  };
  CHECK(connections(nullptr) == std::vector<long>{1, 1, 1});  // cold: one each
  ConnectionShares shares;
  ConnectionShare* share = shares.For(UrlOrigin(url));
  REQUIRE(share != nullptr);
  CHECK(share == shares.For(UrlOrigin(url)));
  CHECK(connections(share) == std::vector<long>{1, 0, 0});  // warm: the first one's, reused
  // Bounded: past its limit of origins, exchanges start cold.
  ConnectionShares one(1);
  CHECK(one.For("https://a:443") != nullptr);
  CHECK(one.For("https://b:443") == nullptr);
}

TEST_CASE("clients that share connections ping a registry once, not once each",
          "[registry][docker-registry]") {
  if (!HaveRegistryTools()) return;
  PushedImage pushed("test/img:v1");
  Proxy proxy(pushed.reg.port(), {});  // plain http on loopback: https is tried first
  auto count = [&proxy](std::string_view what) {
    int n = 0;
    for (const Seen& s : proxy.seen()) n += s.target.find(what) != std::string::npos ? 1 : 0;
    return n;
  };
  const std::string ref = "docker://" + proxy.host() + "/test/img:v1";
  LoadOptions cold;
  ResolveRegistryManifest(ref, cold);
  ResolveRegistryManifest(ref, cold);
  const int cold_pings = count("/v2/") - count("/manifests/");
  CHECK(cold_pings >= 2);  // each client checks /v2/ itself
  LoadOptions warm;
  warm.registry.connections = std::make_shared<ConnectionShares>();
  const int before = count("/v2/") - count("/manifests/");
  for (int i = 0; i < 3; ++i)
    CHECK(ResolveRegistryManifest(ref, warm).digest == pushed.img.manifest_digest);
  CHECK(count("/v2/") - count("/manifests/") - before == cold_pings / 2);  // the first client's
  CHECK(count("/manifests/") == 5);
  CHECK(warm.registry.connections->CheckedApi(proxy.host()) == "http://" + proxy.host());
}

TEST_CASE("a registry that dies after its ping was remembered is a one-line error, at once",
          "[registry][docker-registry]") {
  if (!HaveRegistryTools()) return;
  PushedImage pushed("test/img:v1");
  LoadOptions warm;
  warm.registry.connections = std::make_shared<ConnectionShares>();
  std::string host;
  {
    Proxy proxy(pushed.reg.port(), {});
    host = proxy.host();
    CHECK(ResolveRegistryManifest("docker://" + host + "/test/img:v1", warm).digest ==
          pushed.img.manifest_digest);
  }  // the proxy is gone; its answer to the ping is still remembered
  REQUIRE(warm.registry.connections->CheckedApi(host) == "http://" + host);
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(ResolveRegistryManifest("docker://" + host + "/test/img:v1", warm),
                    Catch::Contains(host) && !Catch::Contains("\n"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}

}  // namespace
}  // namespace imgcheck::image

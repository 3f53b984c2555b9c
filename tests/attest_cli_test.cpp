// The CI gate's verdict travelling with the image, end to end through the command line: `key
// generate`, `scan --attest` against a real docker-registry (its .att tag read back by skopeo,
// an independent client), `verify` with the right key, another key, another policy and none.
#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "image_writer.h"
#include "registry_server.h"
#include "support.h"
#include "util/sha256.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;

namespace {

// An image with nothing to find: one layer, one file.
std::string CleanLayout(const fs::path& dir) {
  ImageRecipe r;
  r.layers.push_back(MakeLayer({Dir("etc"), File("etc/marker", "clean")}, Compression::kGzip,
                               "COPY marker /etc/"));
  WriteOciLayout(dir, r);
  return "oci:" + dir.string() + ":latest";
}

// The tags of `repo` as skopeo lists them.
std::string Tags(const Registry& reg, const std::string& repo) {
  CommandResult r = Run("skopeo list-tags --tls-verify=false docker://" + reg.host() + "/" + repo);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return r.output;
}

// docker-registry 2.8 (no referrers API) behind a proxy that adds it, as distribution-spec 1.1
// has it: a manifest PUT with a `subject` is answered with OCI-Subject and listed by
// GET /v2/NAME/referrers/DIGEST (an image index; ?artifactType= filters, OCI-Filters-Applied).
class ReferrersProxy {
 public:
  explicit ReferrersProxy(int registry_port) : registry_port_(registry_port) {
    server_.Get(R"(/v2/(.+)/referrers/(sha256:[0-9a-f]{64}))",
                [this](const httplib::Request& req, httplib::Response& res) { List(req, res); });
    auto forward = [this](const httplib::Request& req, httplib::Response& res) {
      Forward(req, res);
    };
    server_.Get(R"(/v2/.*)", forward);
    server_.Post(R"(/v2/.*)", forward);
    server_.Put(R"(/v2/.*)", forward);
    server_.Patch(R"(/v2/.*)", forward);
    server_.Delete(R"(/v2/.*)", forward);
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ReferrersProxy() {
    server_.stop();
    thread_.join();
  }
  ReferrersProxy(const ReferrersProxy&) = delete;
  ReferrersProxy& operator=(const ReferrersProxy&) = delete;

  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  int listings() const { return listings_; }

 private:
  void Forward(const httplib::Request& req, httplib::Response& res) {
    httplib::Request up;
    up.method = req.method;
    up.path = httplib::append_query_params(req.path, req.params);
    // Host too: the registry's upload locations then name the proxy.
    for (const char* h : {"Host", "Accept", "Content-Type"})
      if (req.has_header(h)) up.set_header(h, req.get_header_value(h));
    up.body = req.body;
    httplib::Client registry("127.0.0.1", registry_port_);
    httplib::Result r = registry.send(up);
    if (!r) {
      res.status = 502;
      return;
    }
    res.status = r->status;
    for (const auto& [k, v] : r->headers)
      if (k != "Content-Length" && k != "Transfer-Encoding" && k != "Connection")
        res.set_header(k, k == "Location" ? EscapedQuery(v) : v);
    res.body = r->body;
    size_t at = req.path.find("/manifests/");
    if (req.method == "PUT" && r->status == 201 && at != std::string::npos)
      Index(req.path.substr(4, at - 4), req, res);
  }

  // `url` with its query's values percent-encoded: cpp-httplib 0.11 cuts a value at a second '='
  // (docker-registry's upload _state ends in base64 padding) when the client sends it back.
  static std::string EscapedQuery(const std::string& url) {
    size_t q = url.find('?');
    if (q == std::string::npos) return url;
    std::string out = url.substr(0, q);
    char sep = '?';
    std::istringstream query(url.substr(q + 1));
    for (std::string part; std::getline(query, part, '&'); sep = '&') {
      size_t eq = part.find('=');
      out += sep + part.substr(0, eq);
      if (eq != std::string::npos)
        out += "=" + httplib::detail::encode_query_param(
                         httplib::detail::decode_url(part.substr(eq + 1), false));
    }
    return out;
  }

  // A manifest with a subject joins the subject's referrers (distribution-spec 1.1 "Pushing
  // Manifests with Subject": the descriptor carries its artifactType and annotations).
  void Index(const std::string& name, const httplib::Request& req, httplib::Response& res) {
    auto m = nlohmann::json::parse(req.body, nullptr, false);
    if (!m.is_object() || !m.contains("subject")) return;
    std::string subject = m["subject"]["digest"];
    nlohmann::json d = {{"mediaType", req.get_header_value("Content-Type")},
                        {"size", req.body.size()},
                        {"digest", imgcheck::util::Sha256Digest(req.body)},
                        {"artifactType", m.value("artifactType", m["config"]["mediaType"])}};
    if (m.contains("annotations")) d["annotations"] = m["annotations"];
    {
      std::lock_guard lock(mu_);
      referrers_[name + "@" + subject].push_back(d);
    }
    res.set_header("OCI-Subject", subject);
  }

  void List(const httplib::Request& req, httplib::Response& res) {
    ++listings_;
    std::string type = req.has_param("artifactType") ? req.get_param_value("artifactType") : "";
    nlohmann::json list = nlohmann::json::array();
    {
      std::lock_guard lock(mu_);
      for (const auto& d :
           referrers_[std::string(req.matches[1]) + "@" + std::string(req.matches[2])])
        if (type.empty() || d["artifactType"] == type) list.push_back(d);
    }
    if (!type.empty()) res.set_header("OCI-Filters-Applied", "artifactType");
    nlohmann::json index = {{"schemaVersion", 2},
                            {"mediaType", "application/vnd.oci.image.index.v1+json"},
                            {"manifests", list}};
    res.set_content(index.dump(), "application/vnd.oci.image.index.v1+json");
  }

  int registry_port_;
  int port_ = 0;
  std::atomic<int> listings_{0};
  std::mutex mu_;
  std::map<std::string, std::vector<nlohmann::json>> referrers_;
  httplib::Server server_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("attest: --attest-format bundle uses the referrers API where there is one",
          "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  TempDir work;
  Registry reg({});
  reg.Push(CleanLayout(work / "clean"), "team/clean:1");
  reg.Push(CleanLayout(work / "other"), "team/tagged:1");
  ReferrersProxy proxy(reg.port());
  REQUIRE(Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(work / "ci"))).status ==
          0);
  const std::string key = " --key " + Quote(work / "ci.key");
  const std::string pub = " --key " + Quote(work / "ci.pub");

  // Through the proxy: a referrer, found by the API; no fallback tag written.
  std::string via_api = "docker://" + proxy.host() + "/team/clean:1";
  CommandResult scan =
      Run(ImgcheckCommand("scan " + via_api + " --attest --attest-format bundle" + key));
  INFO(scan.output);
  REQUIRE(scan.status == 0);
  CHECK_THAT(scan.output, Catch::Contains("imgcheck: attested " + proxy.host() + "/team/clean@"));
  CHECK_THAT(scan.output, Catch::Contains("(a referrer of sha256:"));
  CHECK_THAT(Tags(reg, "team/clean"), !Catch::Contains("sha256-"));
  // The independent verifier finds it through the API too.
  const std::string attested = "/team/clean@";
  std::string digest = scan.output.substr(scan.output.find(attested) + attested.size(), 71);
  CommandResult py =
      Run("python3 " + Quote(SourceDir() / "testdata/attest/verify.py") + " bundle http://" +
          proxy.host() + " team/clean " + digest + " " + Quote(work / "ci.pub") + " 1");
  INFO(py.output);
  CHECK(py.status == 0);
  CHECK_THAT(py.output, Catch::Contains("listed by the referrers API"));
  CommandResult verified = Run(ImgcheckCommand("verify " + via_api + pub));
  INFO(verified.output);
  CHECK(verified.status == 0);
  CHECK_THAT(verified.output, Catch::Contains(": PASS (attested, signed by "));
  CHECK(proxy.listings() > 0);
  // The same registry without the API (and without the tag) has nothing to show.
  CommandResult direct =
      Run(ImgcheckCommand("verify docker://" + reg.host() + "/team/clean:1" + pub));
  CHECK(direct.status == 2);
  CHECK_THAT(direct.output, Catch::Contains("none is attached"));

  // Straight to docker-registry: the referrers tag schema, which verify reads back.
  std::string tagged = "docker://" + reg.host() + "/team/tagged:1";
  CommandResult fallback =
      Run(ImgcheckCommand("scan " + tagged + " --attest --attest-format bundle" + key));
  INFO(fallback.output);
  REQUIRE(fallback.status == 0);
  CHECK_THAT(fallback.output, Catch::Contains("(listed at tag sha256-"));
  CHECK_THAT(Tags(reg, "team/tagged"),
             Catch::Matches("(?:.|\\n)*\"sha256-[0-9a-f]{64}\"(?:.|\\n)*"));
  CHECK(Run(ImgcheckCommand("verify " + tagged + pub)).status == 0);
  CommandResult bogus =
      Run(ImgcheckCommand("scan " + tagged + " --attest --attest-format sig" + key));
  CHECK(bogus.status == 2);
  CHECK_THAT(bogus.output, Catch::Contains("att|bundle"));
}

TEST_CASE("attest: scan --attest signs the verdict into the registry, verify reads it back",
          "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  TempDir work;
  Registry reg({});
  reg.Push("oci:" + (BinaryDir() / "demo/image").string() + ":latest", "team/cuda:1");
  reg.Push(CleanLayout(work / "clean"), "team/clean:1");
  std::string bad = "docker://" + reg.host() + "/team/cuda:1";
  std::string good = "docker://" + reg.host() + "/team/clean:1";

  CommandResult gen =
      Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(work / "ci")));
  INFO(gen.output);
  REQUIRE(gen.status == 0);
  const fs::perms owner_rw = fs::perms::owner_read | fs::perms::owner_write;
  CHECK((fs::status(work / "ci.key").permissions() & fs::perms::all) == owner_rw);
  REQUIRE(
      Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(work / "other"))).status ==
      0);
  // Never replaced: a second generate with the same prefix is refused.
  CommandResult again =
      Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(work / "ci")));
  CHECK(again.status == 2);
  CHECK_THAT(again.output, Catch::Contains("exists; not replacing it"));

  // The gate: the broken image fails (exit 1) and is attested all the same, as failing.
  CommandResult scan = Run(ImgcheckCommand("scan " + bad + " --attest --key " +
                                           Quote(work / "ci.key") + " --format json"));
  INFO(scan.output);
  CHECK(scan.status == 1);
  CHECK_THAT(scan.output,
             Catch::Contains("imgcheck: attested " + reg.host() + "/team/cuda@sha256:"));
  CHECK_THAT(Tags(reg, "team/cuda"),
             Catch::Matches("(?:.|\\n)*\"sha256-[0-9a-f]{64}\\.att\"(?:.|\\n)*"));
  CommandResult clean =
      Run(ImgcheckCommand("scan " + good + " --attest --key " + Quote(work / "ci.key")));
  INFO(clean.output);
  CHECK(clean.status == 0);

  // verify: the attested verdict, without a scan: exit 1 for the failing image, 0 for the clean.
  CommandResult v_bad = Run(ImgcheckCommand("verify " + bad + " --key " + Quote(work / "ci.pub")));
  INFO(v_bad.output);
  CHECK(v_bad.status == 1);
  CHECK_THAT(v_bad.output, Catch::Contains(": FAIL (attested, signed by "));
  CommandResult v_good = Run(
      ImgcheckCommand("verify " + good + " --key " + Quote(work / "ci.pub") + " --format json"));
  INFO(v_good.output);
  CHECK(v_good.status == 0);
  CHECK_THAT(v_good.output, Catch::Contains("\"verdict\": \"pass\""));

  // Another key: refused with its reason, exit 2 (no attestation verifies).
  CommandResult other =
      Run(ImgcheckCommand("verify " + good + " --key " + Quote(work / "other.pub")));
  INFO(other.output);
  CHECK(other.status == 2);
  CHECK_THAT(other.output, Catch::Contains("no valid attestation of " + good));
  // Another policy (a rules config that sets --fail-on differently is another identity): the
  // attestation was made under the default one, so it does not decide.
  WriteFile(work / "imgcheck.yaml", "fail-on: warning\n");
  CommandResult policy = Run(ImgcheckCommand("verify " + good + " --key " + Quote(work / "ci.pub") +
                                             " --policy-from " + Quote(work / "imgcheck.yaml")));
  INFO(policy.output);
  CHECK(policy.status == 2);
  CHECK(Run(ImgcheckCommand("verify " + good + " --key " + Quote(work / "ci.pub") +
                            " --policy-from " + Quote(work / "imgcheck.yaml") + " --any-policy"))
            .status == 0);
  // An image nobody attested.
  reg.Push(CleanLayout(work / "clean2"), "team/unattested:1");
  CommandResult none = Run(ImgcheckCommand("verify docker://" + reg.host() +
                                           "/team/unattested:1 --key " + Quote(work / "ci.pub")));
  CHECK(none.status == 2);
  CHECK_THAT(none.output, Catch::Contains("none is attached"));
  // --attest without --key: one line, exit 2, before any scan.
  CommandResult nokey = Run(ImgcheckCommand("scan " + good + " --attest"));
  CHECK(nokey.status == 2);
  CHECK_THAT(nokey.output, Catch::Contains("--attest needs --key FILE"));
}

TEST_CASE("attest: an index's attestation is about the platform scanned, verify asks per platform",
          "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  TempDir work;
  Registry reg({});
  // amd64: nothing to find. arm64: the driver stub on the library path (IC020, an error).
  ImageRecipe amd;
  amd.layers.push_back(
      MakeLayer({Dir("etc"), File("etc/arch", "amd64")}, Compression::kGzip, "COPY arch /etc/"));
  ImageRecipe arm;
  arm.architecture = "arm64";
  arm.env = {"LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs"};
  SharedObject runtime, stub;
  runtime.soname = "libcudart.so.12";
  stub.soname = "libcuda.so.1";
  Compile(runtime, work / "so/libcudart.so.12");
  Compile(stub, work / "so/libcuda.so.1");
  arm.layers.push_back(MakeLayer(
      {FileFrom("usr/local/cuda/lib64/libcudart.so.12.4.127", work / "so/libcudart.so.12"),
       Symlink("usr/local/cuda/lib64/libcudart.so.12", "libcudart.so.12.4.127"),
       FileFrom("usr/local/cuda/lib64/stubs/libcuda.so", work / "so/libcuda.so.1"),
       Symlink("usr/local/cuda/lib64/stubs/libcuda.so.1", "libcuda.so")},
      Compression::kGzip, "COPY cuda /usr/local/cuda"));
  std::vector<WrittenImage> multi = WriteMultiPlatformLayout(work / "multi", {amd, arm});
  REQUIRE(Run("skopeo --insecure-policy copy -q --all --preserve-digests --dest-tls-verify=false "
              "'oci:" +
              (work / "multi").string() + ":latest' 'docker://" + reg.host() + "/team/multi:1'")
              .status == 0);
  const std::string image = "docker://" + reg.host() + "/team/multi:1";
  const std::string& amd_digest = multi[0].manifest_digest;
  const std::string& arm_digest = multi[1].manifest_digest;
  REQUIRE(Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(work / "ci"))).status ==
          0);
  const std::string key = " --key " + Quote(work / "ci.key");
  const std::string pub = " --key " + Quote(work / "ci.pub");
  auto verify = [&](const std::string& platform) {
    CommandResult r = Run(ImgcheckCommand("verify " + image + pub + " --platform " + platform));
    UNSCOPED_INFO(platform << ": " << r.output);
    return r;
  };

  // The CI job of one platform: its manifest is the subject, the index is in the predicate.
  CommandResult scan =
      Run(ImgcheckCommand("scan " + image + " --platform linux/amd64 --attest" + key));
  INFO(scan.output);
  REQUIRE(scan.status == 0);
  CHECK_THAT(scan.output, Catch::Contains("attested " + reg.host() + "/team/multi@" + amd_digest +
                                          " (linux/amd64 of index sha256:"));
  CHECK_THAT(Tags(reg, "team/multi"), Catch::Contains("sha256-" + amd_digest.substr(7) + ".att") &&
                                          !Catch::Contains("sha256-" + arm_digest.substr(7)));
  // The independent verifier: the statement's subject is the amd64 image manifest.
  CommandResult py =
      Run("python3 " + Quote(SourceDir() / "testdata/attest/verify.py") + " registry http://" +
          reg.host() + " team/multi " + amd_digest + " " + Quote(work / "ci.pub") + " 1");
  INFO(py.output);
  CHECK(py.status == 0);
  CHECK_THAT(py.output, Catch::Contains("verified: " + amd_digest + " verdict pass"));

  // arm64 was never attested: refused, exit 2, one line that says so; "all" with it.
  CommandResult arm64 = verify("linux/arm64");
  CHECK(arm64.status == 2);
  CHECK_THAT(arm64.output, Catch::Contains("for linux/arm64 (" + arm_digest + ") is not attested"));
  CommandResult every = verify("all");
  CHECK(every.status == 2);
  CHECK_THAT(every.output, Catch::Contains(" linux/amd64 " + amd_digest + ": PASS (attested") &&
                               Catch::Contains("linux/arm64 (" + arm_digest + ") is not attested"));
  CommandResult amd64 = verify("linux/amd64");
  CHECK(amd64.status == 0);
  CHECK_THAT(amd64.output, Catch::Contains(" linux/amd64 " + amd_digest + ": PASS (attested"));
  // The pin a policy-engine user needs (docs/admission.md): the platform's manifest digest.
  CommandResult as_json =
      Run(ImgcheckCommand("verify " + image + pub + " --platform linux/amd64 --format json"));
  REQUIRE(as_json.status == 0);
  nlohmann::json j = nlohmann::json::parse(as_json.output);
  CHECK(j["index"].get<std::string>().starts_with("sha256:"));
  CHECK(j["platforms"].size() == 1);
  CHECK(j["platforms"][0]["platform"] == "linux/amd64");
  CHECK(j["platforms"][0]["digest"] == amd_digest);
  CHECK(j["platforms"][0]["predicate"]["image"]["index"] == j["index"]);
  CommandResult mips = verify("linux/mips64le");
  CHECK(mips.status == 2);
  CHECK_THAT(mips.output, Catch::Contains("no image for platform linux/mips64le"));
  // The amd64 verdict is not the index's: no attestation names the index.
  CommandResult by_index =
      Run(ImgcheckCommand("verify docker://" + reg.host() + "/team/multi@" + amd_digest + pub));
  CHECK(by_index.status == 0);  // the platform manifest by digest: its own attestation

  // Every platform scanned and attested: arm64 fails (exit 1), and so does "all".
  CommandResult all = Run(ImgcheckCommand("scan " + image + " --platform all --attest" + key));
  INFO(all.output);
  CHECK(all.status == 1);
  CHECK_THAT(all.output, Catch::Contains("attested " + reg.host() + "/team/multi@" + arm_digest +
                                         " (linux/arm64 of index sha256:"));
  CHECK(verify("linux/arm64").status == 1);
  CHECK_THAT(verify("linux/arm64").output, Catch::Contains(": FAIL (attested"));
  CHECK(verify("all").status == 1);
  CHECK(verify("linux/amd64").status == 0);
  // --platform all only attests (the reports of several platforms have no one file).
  CommandResult plain = Run(ImgcheckCommand("scan " + image + " --platform all"));
  CHECK(plain.status == 2);
  CHECK_THAT(plain.output, Catch::Contains("--platform all scans and attests"));
}

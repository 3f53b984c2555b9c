// AdmissionReview parsing and answers, with bodies shaped as the API server sends them.
#include "serve/front/admission.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "serve/front/gatekeeper.h"

using namespace imgcheck::serve;
using namespace imgcheck::serve::front;
using namespace imgcheck::serve::fleet;
using nlohmann::json;

namespace {

json Review(const std::string& kind, const json& object) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
            {"kind", {{"group", kind == "Pod" ? "" : "apps"}, {"version", "v1"}, {"kind", kind}}},
            {"resource", {{"group", "apps"}, {"version", "v1"}, {"resource", "deployments"}}},
            {"name", "web"},
            {"namespace", "team-a"},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "admin"}}},
            {"object", object},
            {"oldObject", nullptr},
            {"dryRun", false}}}};
}

json PodSpec() {
  return {{"initContainers", {{{"name", "setup"}, {"image", "reg:5000/setup:1"}}}},
          {"containers",
           {{{"name", "app"}, {"image", "reg:5000/app:1"}},
            {{"name", "side"}, {"image", "reg:5000/side@sha256:" + std::string(64, 'a')}}}}};
}

std::shared_ptr<const Verdict> MakeVerdict(std::vector<VerdictFinding> findings) {
  auto v = std::make_shared<Verdict>();
  v->digest = "sha256:" + std::string(64, 'b');
  v->findings = std::move(findings);
  return v;
}

ImageResult Ready(const std::string& image, std::vector<VerdictFinding> findings) {
  ImageResult r;
  r.use = {image, "spec.containers[0] (app)"};
  r.digest = "sha256:" + std::string(64, 'b');
  r.outcome.state = Outcome::State::kReady;
  r.outcome.verdict = MakeVerdict(std::move(findings));
  return r;
}

VerdictFinding Error() {
  return {"IC001",
          "cudnn-version-mismatch",
          imgcheck::rules::Severity::kError,
          "cuDNN 5.0.5 first",
          "/opt/cudnn/lib64/libcudnn.so.5.0.5",
          "remove /opt/cudnn/lib64 from LD_LIBRARY_PATH"};
}

VerdictFinding Warning() {
  return {"IC060", "ld-library-path-entry", imgcheck::rules::Severity::kWarning, "empty entry",
          "",      "drop the empty entry"};
}

}  // namespace

TEST_CASE("every workload kind's pod template is read, all three container lists", "[admission]") {
  std::string uid;
  for (const auto& [kind, path] : PodSpecPaths()) {
    json object = PodSpec();
    for (auto it = path.rbegin(); it != path.rend(); ++it)
      object = json{{std::string(*it), object}};
    auto r = ParseAdmissionReview(Review(std::string(kind), object).dump(), "linux/amd64", uid);
    INFO(kind);
    REQUIRE(r);
    CHECK(r->uid == "705ab4f5-6393-11e8-b7cc-42010a800002");
    CHECK(r->kind == kind);
    REQUIRE(r->images.size() == 3);
    CHECK(r->images[0].image == "reg:5000/setup:1");
    CHECK_THAT(r->images[0].where, Catch::EndsWith("initContainers[0] (setup)"));
    CHECK(r->images[2].image == "reg:5000/side@sha256:" + std::string(64, 'a'));
    CHECK(r->platform == "linux/amd64");
  }
  json pod = PodSpec();
  pod["ephemeralContainers"] = {{{"name", "debug"}, {"image", "busybox"}}};
  pod["nodeSelector"] = {{"kubernetes.io/arch", "arm64"}};
  auto r = ParseAdmissionReview(Review("Pod", {{"spec", pod}}).dump(), "linux/amd64", uid);
  REQUIRE(r);
  CHECK(r->images.size() == 4);
  CHECK(r->images[3].where == "spec.ephemeralContainers[0] (debug)");
  CHECK(r->platform == "linux/arm64");
}

TEST_CASE("unreadable or unknown requests are errors, with the uid when there is one",
          "[admission]") {
  std::string uid;
  auto bad = ParseAdmissionReview("{not json", "linux/amd64", uid);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "the body is not JSON");
  CHECK(uid.empty());
  auto cm = ParseAdmissionReview(Review("ConfigMap", {{"data", {}}}).dump(), "linux/amd64", uid);
  REQUIRE_FALSE(cm);
  CHECK(cm.error().message == "kind 'ConfigMap' is not one imgcheck checks");
  CHECK(uid == "705ab4f5-6393-11e8-b7cc-42010a800002");
  json v1beta1 = Review("Pod", {{"spec", PodSpec()}});
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  CHECK_FALSE(ParseAdmissionReview(v1beta1.dump(), "linux/amd64", uid));
  json no_image = PodSpec();
  no_image["containers"][0].erase("image");
  auto ni = ParseAdmissionReview(Review("Pod", {{"spec", no_image}}).dump(), "linux/amd64", uid);
  REQUIRE_FALSE(ni);
  CHECK(ni.error().message == "spec.containers[0] (app) has no image");
  json del = Review("Pod", nullptr);
  del["request"]["operation"] = "DELETE";
  auto d = ParseAdmissionReview(del.dump(), "linux/amd64", uid);
  REQUIRE(d);  // nothing to judge, so nothing to deny
  CHECK(d->images.empty());
  CHECK(Decide({}, {}).allowed);
  json wrong_type = PodSpec();
  wrong_type["containers"] = "x";
  CHECK_FALSE(ParseAdmissionReview(Review("Pod", {{"spec", wrong_type}}).dump(), "", uid));
  // Fields of the wrong type are errors, never exceptions; so are documents past the limits.
  for (const char* body :
       {R"({"kind":5})", R"({"kind":"AdmissionReview","apiVersion":[1]})", R"([1,2])", R"("x")"})
    CHECK_FALSE(ParseAdmissionReview(body, "linux/amd64", uid));
  json typed = Review("Pod", {{"spec", PodSpec()}});
  typed["request"]["object"]["spec"]["containers"][0]["name"] = 7;
  typed["request"]["object"]["spec"]["nodeSelector"] = {{"kubernetes.io/arch", 1}};
  auto t = ParseAdmissionReview(typed.dump(), "linux/amd64", uid);
  REQUIRE(t);
  CHECK(t->images[1].where == "spec.containers[0]");
  CHECK(t->platform == "linux/amd64");
  auto deep = ParseAdmissionReview(std::string(65, '[') + std::string(65, ']'), "", uid);
  REQUIRE_FALSE(deep);
  CHECK(deep.error().message == "the body nests deeper than 64");
  CHECK(
      ParseAdmissionReview(std::string(64, '[') + std::string(64, ']'), "", uid).error().message ==
      "the body is not an AdmissionReview");
  std::string wide = "[" + std::string(500000, '0');
  for (size_t i = 2; i < wide.size(); i += 2) wide[i] = ',';
  auto w = ParseAdmissionReview(wide + "]", "", uid);
  REQUIRE_FALSE(w);
  CHECK(w.error().message == "the body holds more than 200000 values");
}

TEST_CASE("a denial lists the first 20 problems and counts the rest", "[admission]") {
  std::vector<ImageResult> images(40, Ready("reg/bad:1", {Error(), Warning()}));
  AdmissionAnswer a = Decide(images, {});
  REQUIRE_FALSE(a.allowed);
  CHECK_THAT(a.message, Catch::StartsWith("imgcheck: denied: 40 problems\n") &&
                            Catch::EndsWith("\n- and 20 more"));
  size_t listed = 0;
  for (size_t at = a.message.find("\n- spec"); at != std::string::npos;
       at = a.message.find("\n- spec", at + 1))
    ++listed;
  CHECK(listed == 20);
  CHECK(a.warnings.size() == 32);
}

TEST_CASE("errors deny with rule, file and fix, warnings go to warnings", "[admission]") {
  DecideOptions o;
  AdmissionAnswer a = Decide({Ready("reg/ok:1", {Warning()}), Ready("reg/bad:1", {Error()})}, o);
  CHECK_FALSE(a.allowed);
  CHECK(a.code == 403);
  CHECK_THAT(a.message, Catch::StartsWith("imgcheck: denied: 1 problem\n- spec.containers[0]"));
  CHECK_THAT(a.message, Catch::Contains("reg/bad:1 (sha256:bbbb"));
  CHECK_THAT(a.message, Catch::Contains("IC001 cudnn-version-mismatch in "
                                        "/opt/cudnn/lib64/libcudnn.so.5.0.5; fix: remove"));
  REQUIRE(a.warnings.size() == 1);
  CHECK_THAT(a.warnings[0], Catch::Contains("reg/ok:1: IC060"));

  o.fail_on = {std::nullopt};  // --fail-on none: errors only warn
  AdmissionAnswer none = Decide({Ready("reg/bad:1", {Error()})}, o);
  CHECK(none.allowed);
  CHECK(none.warnings.size() == 1);

  json j = json::parse(AdmissionResponse("u-1", a));
  CHECK(j["apiVersion"] == "admission.k8s.io/v1");
  CHECK(j["kind"] == "AdmissionReview");
  CHECK(j["response"]["uid"] == "u-1");
  CHECK(j["response"]["allowed"] == false);
  CHECK(j["response"]["status"]["code"] == 403);
  CHECK(j["response"]["warnings"].size() == 1);
  json ok = json::parse(AdmissionResponse("u-2", none));
  CHECK(ok["response"]["allowed"] == true);
  CHECK_FALSE(ok["response"].contains("status"));
}

TEST_CASE("no verdict in time and unjudgeable requests follow --on-unknown and --on-error",
          "[admission]") {
  ImageResult pending;
  pending.use = {"reg/new:1", "spec.containers[0] (app)"};
  pending.digest = "sha256:" + std::string(64, 'c');
  ImageResult failed = pending;
  failed.outcome.state = Outcome::State::kFailed;
  failed.outcome.error = "registry reg is not in --allow-registry";
  DecideOptions o;
  AdmissionAnswer allow = Decide({pending, failed}, o);
  CHECK(allow.allowed);
  REQUIRE(allow.warnings.size() == 2);
  CHECK_THAT(allow.warnings[0],
             Catch::Contains("not scanned yet") && Catch::Contains("--on-unknown=allow"));
  CHECK_THAT(allow.warnings[1],
             Catch::Contains("--allow-registry") && Catch::Contains("--on-error=allow"));
  o.on_unknown = Fallback::kDeny;
  AdmissionAnswer deny = Decide({pending, failed}, o);
  CHECK_FALSE(deny.allowed);
  CHECK_THAT(deny.message, Catch::Contains("--on-unknown=deny"));
  CHECK(deny.warnings.size() == 1);

  CHECK(Unjudgeable("the body is not JSON", Fallback::kAllow).allowed);
  AdmissionAnswer u = Unjudgeable("the body is not JSON", Fallback::kDeny);
  CHECK_FALSE(u.allowed);
  CHECK(u.message == "imgcheck: the body is not JSON (--on-error=deny)");
}

TEST_CASE("Gatekeeper provider requests and responses", "[gatekeeper]") {
  json req = {{"apiVersion", "externaldata.gatekeeper.sh/v1beta1"},
              {"kind", "ProviderRequest"},
              {"request", {{"keys", {"reg/ok:1", "reg/bad:1"}}}}};
  auto keys = ParseProviderRequest(req.dump());
  REQUIRE(keys);
  CHECK(*keys == std::vector<std::string>{"reg/ok:1", "reg/bad:1"});
  CHECK_FALSE(ParseProviderRequest("[]"));
  req["request"]["keys"] = {1};
  CHECK_FALSE(ParseProviderRequest(req.dump()));

  ImageResult failed;
  failed.use = {"other/x", "key"};
  failed.outcome.state = Outcome::State::kFailed;
  failed.outcome.error = "no such image";
  json resp = json::parse(
      ProviderResponse({Ready("reg/ok:1", {Warning()}), Ready("reg/bad:1", {Error()}), failed},
                       {imgcheck::rules::Severity::kError}));
  CHECK(resp["kind"] == "ProviderResponse");
  CHECK(resp["response"]["idempotent"] == true);
  auto& items = resp["response"]["items"];
  REQUIRE(items.size() == 3);
  CHECK(items[0]["key"] == "reg/ok:1");
  CHECK(items[0]["value"]["verdict"] == "pass");
  CHECK(items[0]["value"]["warnings"].size() == 1);
  CHECK(items[1]["value"]["verdict"] == "fail");
  CHECK_THAT(items[1]["value"]["errors"][0].get<std::string>(), Catch::StartsWith("IC001"));
  CHECK(items[2]["error"] == "no such image");
  json sys = json::parse(ProviderResponse({}, {}, "the body is not a ProviderRequest"));
  CHECK(sys["response"]["systemError"] == "the body is not a ProviderRequest");
}

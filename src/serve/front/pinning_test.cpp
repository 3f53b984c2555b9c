// The JSONPatch of mutating admission, applied to the object by nlohmann::json's own RFC 6902
// implementation: every workload kind, all three container lists, what must stay as written.
#include "serve/front/pinning.h"

#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "serve/front/json_body.h"

using namespace imgcheck::serve;
using namespace imgcheck::serve::front;
using namespace imgcheck::serve::fleet;
using nlohmann::json;

namespace {

const std::string kSide = "reg:5000/side@sha256:" + std::string(64, 'a');

json PinReview(const std::string& kind, const json& object) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "u-1"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", kind}}},
            {"name", "web"},
            {"namespace", "team-a"},
            {"operation", "CREATE"},
            {"object", object}}}};
}

json PinPodSpec() {
  return {{"initContainers", {{{"name", "setup"}, {"image", "reg:5000/setup:1"}}}},
          {"containers",
           {{{"name", "app"}, {"image", "reg:5000/app:1"}},
            {{"name", "side"}, {"image", kSide}},
            {{"name", "plain"}, {"image", "reg:5000/plain"}}}},
          {"ephemeralContainers", {{{"name", "debug"}, {"image", "reg:5000/debug:2"}}}}};
}

// The digest "judged" for each image: its own, so a pin to the wrong one shows.
std::string DigestOf(const std::string& image) {
  return "sha256:" + std::string(63, 'c') + static_cast<char>('0' + image.size() % 10);
}

ImageResult Passed(const ImageUse& use) {
  ImageResult r;
  r.use = use;
  r.digest = DigestOf(use.image);
  r.outcome.state = Outcome::State::kReady;
  auto v = std::make_shared<Verdict>();
  v->digest = r.digest;
  r.outcome.verdict = v;
  return r;
}

// request.object of `review` with `patch` applied (as the API server does).
json Patched(const json& review, const std::string& patch) {
  return review["request"]["object"].patch(json::parse(patch));
}

std::string Base64Decode(const std::string& text) {
  std::string out(text.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  REQUIRE(n >= 0);
  out.resize(static_cast<size_t>(n) - (text.size() - text.find_last_not_of('=') - 1));
  return out;
}

}  // namespace

TEST_CASE("pinning: every workload kind, init and ephemeral containers, digests kept",
          "[pinning]") {
  std::string uid;
  for (const auto& [kind, path] : PodSpecPaths()) {
    json object = PinPodSpec();
    for (auto it = path.rbegin(); it != path.rend(); ++it)
      object = json{{std::string(*it), object}};
    json review = PinReview(std::string(kind), object);
    auto r = ParseAdmissionReview(review.dump(), "linux/amd64", uid);
    INFO(kind);
    REQUIRE(r);
    REQUIRE(r->images.size() == 5);
    std::vector<ImageResult> judged;
    for (const ImageUse& use : r->images) judged.push_back(Passed(use));
    Pinning p = PinImages(judged, {imgcheck::rules::Severity::kError});
    CHECK(p.unpinned.empty());
    REQUIRE(p.pins.size() == 4);  // not the one by digest
    json after = Patched(review, JsonPatch(p.pins));
    json spec = after;
    for (auto key : path) spec = spec[std::string(key)];
    CHECK(spec["initContainers"][0]["image"] == "reg:5000/setup:1@" + DigestOf("reg:5000/setup:1"));
    CHECK(spec["containers"][0]["image"] == "reg:5000/app:1@" + DigestOf("reg:5000/app:1"));
    CHECK(spec["containers"][1]["image"] == kSide);
    CHECK(spec["containers"][2]["image"] == "reg:5000/plain@" + DigestOf("reg:5000/plain"));
    CHECK(spec["ephemeralContainers"][0]["image"] ==
          "reg:5000/debug:2@" + DigestOf("reg:5000/debug:2"));
    // Nothing else changed.
    json before = review["request"]["object"];
    CHECK(json::diff(before, after).size() == 4);
    // Idempotent, as reinvocationPolicy IfNeeded needs: the pinned object pins nothing more.
    auto again =
        ParseAdmissionReview(PinReview(std::string(kind), after).dump(), "linux/amd64", uid);
    REQUIRE(again);
    std::vector<ImageResult> rejudged;
    for (const ImageUse& use : again->images) rejudged.push_back(Passed(use));
    CHECK(PinImages(rejudged, {imgcheck::rules::Severity::kError}).pins.empty());
  }
}

TEST_CASE("pinning: denied images stay, undecided ones are pinned, unresolved ones warned",
          "[pinning]") {
  std::string uid;
  json review = PinReview("Pod", {{"spec", PinPodSpec()}});
  auto r = ParseAdmissionReview(review.dump(), "linux/amd64", uid);
  REQUIRE(r);
  std::vector<ImageResult> judged;
  for (const ImageUse& use : r->images) judged.push_back(Passed(use));
  // setup: its verdict fails the gate; app: its scan goes on; plain: not resolved;
  // debug: its scan failed (--on-error decides, on that digest).
  auto failing = std::make_shared<Verdict>();
  failing->findings.push_back({"IC001", "cudnn-version-mismatch", imgcheck::rules::Severity::kError,
                               "cuDNN 5.0.5 first", "/opt/cudnn/lib64/libcudnn.so.5.0.5", "fix"});
  judged[0].outcome.verdict = failing;
  judged[1].outcome = {};  // pending
  judged[3].digest.clear();
  judged[3].outcome = {Outcome::State::kFailed, nullptr, "the registry did not answer in time", ""};
  judged[4].outcome = {Outcome::State::kFailed, nullptr, "scan failed: truncated layer", ""};
  Pinning p = PinImages(judged, {imgcheck::rules::Severity::kError});
  REQUIRE(p.pins.size() == 2);
  CHECK(p.pins[0].pointer == "/spec/containers/0/image");
  CHECK(p.pins[0].image == "reg:5000/app:1@" + DigestOf("reg:5000/app:1"));
  CHECK(p.pins[1].pointer == "/spec/ephemeralContainers/0/image");
  REQUIRE(p.unpinned.size() == 1);
  CHECK(p.unpinned[0] ==
        "spec.containers[2] (plain) reg:5000/plain: the registry did not answer in time");
  // Under a gate that fails nothing (--fail-on none) the same verdict denies nothing: pinned.
  Pinning lenient = PinImages(judged, imgcheck::rules::FailOn{});
  CHECK(lenient.pins.size() == 3);
  // A use with no pointer (Gatekeeper's keys) is never patched.
  ImageResult key = Passed({"reg:5000/app:1", "key", ""});
  CHECK(PinImages({key}, {imgcheck::rules::Severity::kError}).pins.empty());
  CHECK(JsonPatch({}).empty());
}

TEST_CASE("pinning: JSON Pointer tokens are escaped, and the answer carries the patch",
          "[pinning]") {
  CHECK(JsonPointer({"spec", "containers", "0", "image"}) == "/spec/containers/0/image");
  CHECK(JsonPointer({"a/b", "m~n", "~1"}) == "/a~1b/m~0n/~01");
  CHECK(JsonPointer({""}) == "/");
  json doc = {{"a/b", {{"m~n", {{"~1", "x"}}}}}};
  CHECK(doc.at(json::json_pointer(JsonPointer({"a/b", "m~n", "~1"}))) == "x");
  json patched =
      doc.patch(json::parse(JsonPatch({{JsonPointer({"a/b", "m~n", "~1"}), "r:1@sha256:0"}})));
  CHECK(patched["a/b"]["m~n"]["~1"] == "r:1@sha256:0");

  AdmissionAnswer a;
  a.patch = JsonPatch({{"/spec/containers/0/image", "r:1@sha256:" + std::string(64, 'd')}});
  json answer = json::parse(AdmissionResponse("u-1", a));
  CHECK(answer["response"]["allowed"] == true);
  CHECK(answer["response"]["patchType"] == "JSONPatch");
  CHECK(Base64Decode(answer["response"]["patch"]) == a.patch);
  json none = json::parse(AdmissionResponse("u-2", AdmissionAnswer{}));
  CHECK_FALSE(none["response"].contains("patch"));
  CHECK_FALSE(none["response"].contains("patchType"));
}

TEST_CASE("pinning: an UPDATE pins only the images it changes", "[pinning]") {
  // A pod created before pinning (or by hand) has tags; an update that adds an ephemeral
  // container (kubectl debug: pods/ephemeralcontainers) or changes one image must not rewrite
  // the others: a changed image restarts the container, and the subresource refuses it.
  json old_pod = {{"spec", PinPodSpec()}};
  old_pod["spec"].erase("ephemeralContainers");
  json new_pod = {{"spec", PinPodSpec()}};
  new_pod["spec"]["containers"][2]["image"] = "reg:5000/plain:2";
  json review = PinReview("Pod", new_pod);
  review["request"]["operation"] = "UPDATE";
  review["request"]["oldObject"] = old_pod;
  std::string uid;
  auto r = ParseAdmissionReview(review.dump(), "linux/amd64", uid);
  REQUIRE(r);
  REQUIRE(r->images.size() == 5);
  CHECK(r->images[0].unchanged);
  CHECK(r->images[1].unchanged);
  CHECK_FALSE(r->images[3].unchanged);  // plain -> plain:2
  CHECK_FALSE(r->images[4].unchanged);  // the new ephemeral container
  std::vector<ImageResult> judged;
  for (const ImageUse& use : r->images) judged.push_back(Passed(use));
  Pinning p = PinImages(judged, {imgcheck::rules::Severity::kError});
  REQUIRE(p.pins.size() == 2);
  CHECK(p.pins[0].pointer == "/spec/containers/2/image");
  CHECK(p.pins[1].pointer == "/spec/ephemeralContainers/0/image");
  // A CREATE (or an UPDATE without oldObject) pins them all.
  review["request"]["operation"] = "CREATE";
  auto created = ParseAdmissionReview(review.dump(), "linux/amd64", uid);
  REQUIRE(created);
  for (const ImageUse& use : created->images) CHECK_FALSE(use.unchanged);
}

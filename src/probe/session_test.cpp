// The probe's reports: names that are not UTF-8 (an image's file names, a TMPDIR) come out as
// valid JSON, and the probe's byte escapes come back as the bytes they stand for.
#include "probe/session.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "probe/observation.h"

namespace imgcheck::probe {
namespace {

TEST_CASE("the probe's u00XX JSON escapes come back as the bytes of the path it printed") {
  // imgcheck-probe writes each byte outside printable ASCII as \u00XX: 0xE9 alone (Latin-1) and
  // the two bytes of UTF-8 "é".
  std::string doc = R"({"probe":"imgcheck-probe","status":"ran",)"
                    R"("libraries":[{"role":"cudnn","path":"/tmp/x\u00e9/libcudnn.so.9",)"
                    R"("loaded":true}],"loaded_objects":["/tmp/\u00c3\u00a9/a.so"]})";
  Observation o = ParseObservation(doc);
  REQUIRE(o.outcome == Observation::Outcome::kRan);
  REQUIRE(o.libraries.size() == 1);
  CHECK(o.libraries[0].path == "/tmp/x\xE9/libcudnn.so.9");
  REQUIRE(o.loaded_objects.size() == 1);
  CHECK(o.loaded_objects[0] == "/tmp/\xC3\xA9/a.so");
  // A string the probe cannot have written (a code point above U+00FF) is kept as it is.
  CHECK(ParseProbeDocument(R"({"k":"\u20ac"})")["k"] == "\xE2\x82\xAC");
  CHECK(ParseProbeDocument("not json").is_discarded());
}

TEST_CASE("the JSON report of a session with names that are not UTF-8 is valid JSON") {
  Session s;
  s.image = "oci:/images/caf\xE9:latest";
  PlannedLibrary lib;
  lib.role = "cudnn";
  lib.soname = "libcudnn.so.9";
  lib.image_path = "/opt/\xE9/libcudnn.so.9";
  lib.layer = 0;
  s.plan.libraries.push_back(lib);
  s.staged.push_back({lib, "/tmp/imgcheck-probe-\xFF/libcudnn.so.9"});
  s.observation =
      ParseObservation(R"({"probe":"imgcheck-probe","status":"ran","libraries":[{"role":"cudnn",)"
                       R"("path":"/tmp/imgcheck-probe-\u00ff/libcudnn.so.9","loaded":true}]})");
  std::string text = Format(s, ReportFormat::kJson);
  nlohmann::json j = nlohmann::json::parse(text);  // throws on invalid UTF-8 or syntax
  CHECK(j["image"] == "oci:/images/caf\\xE9:latest");
  CHECK(j["libraries"][0]["path"] == "/opt/\\xE9/libcudnn.so.9");
  CHECK(j["probe"]["libraries"][0]["path"] == "/tmp/imgcheck-probe-\\xFF/libcudnn.so.9");
  CHECK(j["status"] == "ran");
}

}  // namespace
}  // namespace imgcheck::probe

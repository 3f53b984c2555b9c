// `imgcheck rules push`, `rules update`, `rules list` and `version` through the binary: the
// rule data as an OCI artifact in a layout (the air-gapped route; registry_test.cpp pushes and
// pulls through a real registry), the cache it installs into, and the one-line refusals.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support.h"

namespace imgcheck::testing {
namespace {

namespace fs = std::filesystem;

// stderr alone of `args` (Run captures both streams): the error line.
CommandResult Stderr(const std::string& args) {
  return Run("{ " + ImgcheckCommand(args) + " 2>&1 >/dev/null; }");
}

size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST_CASE("rules data: pushed, updated from an OCI layout, listed, refused when tampered",
          "[rules][cli]") {
  TempDir tmp;
  fs::path layout = tmp / "layout", cache = tmp / "cache";
  std::string cache_flag = " --rules-cache " + Quote(cache);

  CommandResult version = Run(ImgcheckCommand("version"));
  REQUIRE(version.status == 0);
  CHECK_THAT(version.output, Catch::Contains("\nrules data: 20"));

  // A newer copy of the bundled data.
  fs::path newer = tmp / "newer";
  fs::create_directories(newer);
  for (const auto& e : fs::directory_iterator(SourceDir() / "rules"))
    if (e.path().extension() == ".json") fs::copy_file(e.path(), newer / e.path().filename());
  auto v = nlohmann::json::parse(ReadFile(newer / "version.json"));
  v["date"] = "2999-01-01";
  WriteFile(newer / "version.json", v.dump());

  CommandResult push =
      Run(ImgcheckCommand("rules push " + Quote(newer) + " oci:" + Quote(layout) + ":1"));
  INFO(push.output);
  REQUIRE(push.status == 0);
  CHECK_THAT(push.output, Catch::StartsWith("pushed rules data 2999-01-01+"));

  CommandResult update =
      Run(ImgcheckCommand("rules update oci:" + Quote(layout) + ":1" + cache_flag));
  INFO(update.output);
  REQUIRE(update.status == 0);
  CHECK_THAT(update.output, Catch::StartsWith("installed rules data 2999-01-01+"));
  CommandResult list = Run(ImgcheckCommand("rules list" + cache_flag));
  REQUIRE(list.status == 0);
  CHECK_THAT(list.output, Catch::Contains("rules data 2999-01-01+") &&
                              Catch::Contains("from " + (cache / "current").string()));

  SECTION("a tampered layer: exit 2, one line, the installed data stays") {
    std::string index = ReadFile(layout / "index.json");
    auto manifest_digest =
        nlohmann::json::parse(index)["manifests"][0]["digest"].get<std::string>();
    auto manifest =
        nlohmann::json::parse(ReadFile(layout / "blobs/sha256" / manifest_digest.substr(7)));
    fs::path blob =
        layout / "blobs/sha256" / manifest["layers"][0]["digest"].get<std::string>().substr(7);
    std::string bytes = ReadFile(blob);
    bytes[bytes.size() / 2] ^= 1;
    WriteFile(blob, bytes);
    CommandResult refused = Stderr("rules update oci:" + Quote(layout) + ":1" + cache_flag);
    CHECK(refused.status == 2);
    CHECK(Lines(refused.output) == 1);
    CHECK_THAT(refused.output, Catch::Contains("does not match its digest"));
  }
  SECTION("a reference that is not rules data: exit 2, one line") {
    CommandResult refused =
        Stderr("rules update oci:" + Quote(tmp / "nothing") + ":1" + cache_flag);
    CHECK(refused.status == 2);
    CHECK(Lines(refused.output) == 1);
  }
  CommandResult after = Run(ImgcheckCommand("rules list" + cache_flag));
  CHECK_THAT(after.output, Catch::Contains("rules data 2999-01-01+"));
}

}  // namespace
}  // namespace imgcheck::testing

// Rule data as an OCI artifact, through OCI layouts: packed, installed into a cache, preferred
// only when newer and of this binary's schema, and never replaced by data that fails a check.
#include "rules/update.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support.h"
#include "util/error.h"

namespace imgcheck::rules {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// A copy of the bundled data with version.json's `date` and `schema` set.
fs::path CopyRules(const fs::path& to, const std::string& date, int schema = kRulesSchema) {
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(IMGCHECK_RULES_DIR))
    if (e.path().extension() == ".json") fs::copy_file(e.path(), to / e.path().filename());
  nlohmann::json v = nlohmann::json::parse(ReadFile(to / "version.json"));
  v["date"] = date;
  v["schema"] = schema;
  WriteFile(to / "version.json", v.dump(2));
  return to;
}

// DIR published into the layout `layout` as `tag`, and pulled back.
image::Artifact Publish(const fs::path& dir, const fs::path& layout, const std::string& tag) {
  PackedRules p = PackRules(dir.string());
  std::string ref = "oci:" + layout.string() + ":" + tag;
  image::PushArtifact(ref, kRulesArtifact, p.config, p.layer);
  return image::PullArtifact(ref, kRulesArtifact, kMaxRulesLayer);
}

std::string Installed(const fs::path& cache) {
  return Knowledge::Load({(cache / "current").string()}).version().str();
}

TEST_CASE("rules update: installed whole, preferred only when newer", "[update]") {
  TempDir tmp;
  fs::path cache = tmp / "cache", layout = tmp / "layout";
  const std::string bundled = IMGCHECK_RULES_DIR;
  std::string note;
  CHECK(ChooseRulesDir(cache.string(), bundled, &note) == bundled);
  CHECK(note.empty());

  // The bundled data itself: installed, but not newer, so not used (with a note).
  DataVersion same = InstallRules(Publish(bundled, layout, "same"), cache.string());
  CHECK(same.str() == Knowledge::Load({bundled}).version().str());
  CHECK(ChooseRulesDir(cache.string(), bundled, &note) == bundled);
  CHECK_THAT(note, Catch::Contains("is not newer than the bundled data"));

  // Newer data is used.
  fs::path newer = CopyRules(tmp / "newer", "2999-01-01");
  DataVersion v = InstallRules(Publish(newer, layout, "newer"), cache.string());
  CHECK(v.date == "2999-01-01");
  CHECK(ChooseRulesDir(cache.string(), bundled, &note) == (cache / "current").string());
  CHECK(note.empty());
  CHECK(Installed(cache) == v.str());

  // Refused artifacts leave the data in use as it was, and no half-written directory.
  SECTION("a schema this binary does not read") {
    fs::path future = CopyRules(tmp / "future", "2999-02-01", kRulesSchema + 1);
    CHECK_THROWS_WITH(InstallRules(Publish(future, layout, "future"), cache.string()),
                      Catch::Contains("has schema " + std::to_string(kRulesSchema + 1)) &&
                          Catch::Contains("a newer imgcheck is needed"));
  }
  SECTION("data that does not load") {
    image::Artifact a = Publish(newer, layout, "broken");
    std::map<std::string, std::string> files = image::UnpackFiles(a.layer, 64, 1 << 20);
    files["cuda.json"] = "{\"cuda_driver\": {\"rows\": [{\"cuda\": \"x\"}]}}";
    a.layer = image::PackFiles(files);
    CHECK_THROWS_WITH(InstallRules(a, cache.string()),
                      Catch::Contains("is invalid: ") && Catch::Contains("cuda.json:"));
  }
  SECTION("a config that says other than the content") {
    image::Artifact a = Publish(newer, layout, "lying");
    a.config = R"({"schema":1,"date":"2999-01-01","version":"2999-01-01+000000000000"})";
    CHECK_THROWS_WITH(InstallRules(a, cache.string()),
                      Catch::Contains("not what its config states"));
  }
  SECTION("a file that is not rule data") {
    image::Artifact a = Publish(newer, layout, "extra");
    a.layer = image::PackFiles({{"run.sh", "#!/bin/sh"}});
    CHECK_THROWS_WITH(InstallRules(a, cache.string()),
                      Catch::Contains("holds run.sh, not a .json file"));
  }
  CHECK(Installed(cache) == v.str());
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(cache)) left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"current", "v-" + v.digest.substr(0, 16)});
}

TEST_CASE("rules update: installed data of another schema is passed over with a note", "[update]") {
  TempDir tmp;
  fs::path cache = tmp / "cache";
  CopyRules(cache / "v-x", "2999-01-01", kRulesSchema + 1);
  fs::create_directory_symlink("v-x", cache / "current");
  std::string note;
  CHECK(ChooseRulesDir(cache.string(), IMGCHECK_RULES_DIR, &note) == IMGCHECK_RULES_DIR);
  CHECK_THAT(note, Catch::Contains("its schema is " + std::to_string(kRulesSchema + 1)));
}

}  // namespace
}  // namespace imgcheck::rules

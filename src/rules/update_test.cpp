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

// What a caller verified and keeps (attest's record, here a stand-in), and its check.
std::string Record(const image::Artifact& a) { return "signed " + a.manifest_digest; }
std::string Install(const image::Artifact& a, const fs::path& cache) {
  return InstallRules(a, cache.string(), Record(a)).str();
}
const SignatureCheck kCheck = [](const std::string& record, const std::string& digest) {
  return record == "signed " + digest ? std::string() : "not signed by a trusted key";
};

std::string Installed(const fs::path& cache) {
  return Knowledge::Load({(cache / "current").string()}).version().str();
}

TEST_CASE("rules update: installed whole, preferred only when newer", "[update]") {
  TempDir tmp;
  fs::path cache = tmp / "cache", layout = tmp / "layout";
  const std::string bundled = IMGCHECK_RULES_DIR;
  std::string note;
  CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == bundled);
  CHECK(note.empty());

  // The bundled data itself: installed, but not newer, so not used (with a note).
  image::Artifact same_artifact = Publish(bundled, layout, "same");
  DataVersion same = InstallRules(same_artifact, cache.string(), Record(same_artifact));
  CHECK(same.str() == Knowledge::Load({bundled}).version().str());
  CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == bundled);
  CHECK_THAT(note, Catch::Contains("is not newer than the bundled data"));

  // Newer data is used.
  fs::path newer = CopyRules(tmp / "newer", "2999-01-01");
  image::Artifact newer_artifact = Publish(newer, layout, "newer");
  DataVersion v = InstallRules(newer_artifact, cache.string(), Record(newer_artifact));
  CHECK(v.date == "2999-01-01");
  CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == (cache / "current").string());
  CHECK(note.empty());
  CHECK(Installed(cache) == v.str());

  // Refused artifacts leave the data in use as it was, and no half-written directory.
  SECTION("a schema this binary does not read") {
    fs::path future = CopyRules(tmp / "future", "2999-02-01", kRulesSchema + 1);
    CHECK_THROWS_WITH(Install(Publish(future, layout, "future"), cache),
                      Catch::Contains("has schema " + std::to_string(kRulesSchema + 1)) &&
                          Catch::Contains("a newer imgcheck is needed"));
  }
  SECTION("data that does not load") {
    image::Artifact a = Publish(newer, layout, "broken");
    std::map<std::string, std::string> files = image::UnpackFiles(a.layer, 64, 1 << 20);
    files["cuda.json"] = "{\"cuda_driver\": {\"rows\": [{\"cuda\": \"x\"}]}}";
    a.layer = image::PackFiles(files);
    CHECK_THROWS_WITH(Install(a, cache),
                      Catch::Contains("is invalid: ") && Catch::Contains("cuda.json:"));
  }
  SECTION("a config that says other than the content") {
    image::Artifact a = Publish(newer, layout, "lying");
    a.config = R"({"schema":1,"date":"2999-01-01","version":"2999-01-01+000000000000"})";
    CHECK_THROWS_WITH(Install(a, cache), Catch::Contains("not what its config states"));
  }
  SECTION("a file that is not rule data") {
    image::Artifact a = Publish(newer, layout, "extra");
    a.layer = image::PackFiles({{"run.sh", "#!/bin/sh"}});
    CHECK_THROWS_WITH(Install(a, cache), Catch::Contains("holds run.sh, not a .json file"));
  }
  SECTION("older data, signed as well: a rollback") {
    fs::path older = CopyRules(tmp / "older", "2998-01-01");
    CHECK_THROWS_WITH(Install(Publish(older, layout, "older"), cache),
                      Catch::Contains("is not newer than the installed data (of 2999-01-01)") &&
                          Catch::Contains("refusing a rollback"));
    // The same date with other content is no update either (an update moves the date).
    fs::path twin = CopyRules(tmp / "twin", "2999-01-01");
    nlohmann::json tv = nlohmann::json::parse(ReadFile(twin / "version.json"));
    tv["about"] = "other content, the same date";
    WriteFile(twin / "version.json", tv.dump());
    CHECK_THROWS_WITH(Install(Publish(twin, layout, "twin"), cache),
                      Catch::Contains("refusing a rollback"));
  }
  SECTION("the same data again: installed as it is, with the signature it came with") {
    fs::remove(cache / "current/.signature");
    CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == bundled);
    CHECK(Install(Publish(newer, layout, "again"), cache) == v.str());
  }
  CHECK(Installed(cache) == v.str());
  CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == (cache / "current").string());
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(cache)) left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"current", "v-" + v.digest.substr(0, 16)});
}

TEST_CASE("rules update: installed data is used only while it is what was signed", "[update]") {
  TempDir tmp;
  fs::path cache = tmp / "cache", layout = tmp / "layout";
  const std::string bundled = IMGCHECK_RULES_DIR;
  image::Artifact a = Publish(CopyRules(tmp / "newer", "2999-01-01"), layout, "newer");
  Install(a, cache);
  std::string note;
  REQUIRE(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == (cache / "current").string());
  fs::path dir = cache / "current";
  SECTION("a file changed after the install") {
    WriteFile(dir / "cuda.json", ReadFile(dir / "cuda.json") + " ");
    CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == bundled);
    CHECK_THAT(note, Catch::Contains("cuda.json is not the file that was signed"));
  }
  SECTION("a file added") {
    WriteFile(dir / "extra.json", "{}");
    CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == bundled);
    CHECK_THAT(note, Catch::Contains("extra.json is not the file that was signed"));
  }
  SECTION("a file removed") {
    fs::remove(dir / "gpus.json");
    CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == bundled);
    CHECK_THAT(note, Catch::Contains("a file that was signed is missing"));
  }
  SECTION("a signature the check refuses (another key, or no check at all)") {
    SignatureCheck other = [](const std::string&, const std::string&) {
      return std::string("not signed by a trusted key");
    };
    CHECK(ChooseRulesDir(cache.string(), bundled, other, &note) == bundled);
    CHECK_THAT(note, Catch::Contains("its signature: not signed by a trusted key"));
    CHECK(ChooseRulesDir(cache.string(), bundled, SignatureCheck(), &note) == bundled);
    CHECK_THAT(note, Catch::Contains("no signature check"));
  }
  SECTION("data put there by hand, without a record") {
    fs::remove(dir / ".signature");
    CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == bundled);
    CHECK_THAT(note, Catch::Contains("it has no signature record"));
  }
  SECTION("a layer that is not the one its manifest names") {
    WriteFile(dir / ".layer", image::PackFiles({{"version.json", "{}"}}));
    CHECK(ChooseRulesDir(cache.string(), bundled, kCheck, &note) == bundled);
    CHECK_THAT(note, Catch::Contains("its layer is not the one its manifest names"));
  }
}

TEST_CASE("rules update: installed data of another schema is passed over with a note", "[update]") {
  TempDir tmp;
  fs::path cache = tmp / "cache";
  CopyRules(cache / "v-x", "2999-01-01", kRulesSchema + 1);
  fs::create_directory_symlink("v-x", cache / "current");
  std::string note;
  CHECK(ChooseRulesDir(cache.string(), IMGCHECK_RULES_DIR, kCheck, &note) == IMGCHECK_RULES_DIR);
  CHECK_THAT(note, Catch::Contains("its schema is " + std::to_string(kRulesSchema + 1)));
}

}  // namespace
}  // namespace imgcheck::rules

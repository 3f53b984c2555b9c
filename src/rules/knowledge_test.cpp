#include "rules/knowledge.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "rules/scan.h"
#include "support.h"

using namespace imgcheck::rules;
using imgcheck::testing::TempDir;
using imgcheck::testing::WriteFile;

namespace {

const Knowledge& Builtin() {
  static const Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR});
  return k;
}

std::string FatalMessage(const std::vector<std::string>& dirs) {
  try {
    Knowledge::Load(dirs);
  } catch (const imgcheck::util::Fatal& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("versions parse the way NVIDIA and frameworks write them") {
  CHECK(Version::Parse("8.9.2.26-1+cuda12.1")->str() == "8.9.2.26");
  CHECK(Version::Parse("2.8.0+cu128")->str() == "2.8.0");
  CHECK(Version::Parse(">=525.60.13")->str() == "525.60.13");
  CHECK(Version::Parse("v12.4")->str() == "12.4");
  CHECK_FALSE(Version::Parse("none"));
  CHECK(*Version::Parse("12.0") == *Version::Parse("12"));
  CHECK(*Version::Parse("9.10.2") > *Version::Parse("9.9.9"));
  CHECK(InRange(*Version::Parse("1.2.0"), *Version::Parse("1.0"), *Version::Parse("1.8.99")));
  CHECK_FALSE(InRange(*Version::Parse("1.9.0"), *Version::Parse("1.0"), *Version::Parse("1.8.99")));
}

TEST_CASE("the rule table and the checks agree") {
  std::vector<std::string> table;
  for (const auto& r : Builtin().rules()) table.push_back(r.id);
  const std::vector<std::string> contract = {"IC001", "IC002", "IC003", "IC004", "IC010", "IC011",
                                             "IC012", "IC013", "IC014", "IC015", "IC016", "IC020",
                                             "IC021", "IC022", "IC030", "IC031", "IC040", "IC041",
                                             "IC050", "IC051", "IC060", "IC061", "IC062", "IC080"};
  // rules.json holds the scan's rules; other files (probe.json) may add their own.
  for (const auto& id : contract) CHECK(std::count(table.begin(), table.end(), id) == 1);
  CHECK(ImplementedRules() == contract);
  const RuleInfo* r = Builtin().Rule("IC001");
  REQUIRE(r);
  CHECK(r->name == "cudnn-version-mismatch");
  CHECK(r->severity == Severity::kError);
  CHECK(Builtin().Rule("IC051")->severity == Severity::kInfo);
  CHECK(Builtin().Rule("stale-ld-cache")->id == "IC061");
  CHECK(Builtin().SuggestRule("IC0001") == "IC001 (cudnn-version-mismatch)");
  CHECK(Builtin().SuggestRule("shadowed-libary") == "IC010 (shadowed-library)");
  CHECK(Builtin().SuggestRule("completely-different") == "");
}

TEST_CASE("drivers for CUDA releases, with and without minor-version compatibility") {
  const Knowledge& k = Builtin();
  std::string how;
  CHECK(k.MinDriver(*Version::Parse("12.4"), &how)->str() == "525.60.13");
  CHECK(how.find("minor-version") != std::string::npos);
  CHECK(k.MinDriver(*Version::Parse("11.8.89"))->str() == "450.80.02");
  CHECK(k.MinDriver(*Version::Parse("13.0"))->str() == "580.65.06");
  CHECK(k.MinDriver(*Version::Parse("10.1"))->str() == "418.39");
  CHECK(k.MinDriver(*Version::Parse("10.0.130"))->str() == "410.48");
  // 9.2 has two releases; knowing only 9.2, the lenient one.
  CHECK(k.MinDriver(*Version::Parse("9.2"))->str() == "396.26");
  CHECK(k.MinDriver(*Version::Parse("9.2.148"))->str() == "396.37");
  CHECK_FALSE(k.MinDriver(*Version::Parse("6.5")));
}

TEST_CASE("cuDNN version integers change scale at 9") {
  const Knowledge& k = Builtin();
  CHECK(k.DecodeCudnn(8907)->str() == "8.9.7");
  CHECK(k.DecodeCudnn(5005)->str() == "5.0.5");
  CHECK(k.DecodeCudnn(91002)->str() == "9.10.2");
  CHECK(k.DecodeCudnn(90100)->str() == "9.1.0");
  CHECK(k.EncodeCudnn(*Version::Parse("9.1.0")) == 90100);
  CHECK(k.EncodeCudnn(*Version::Parse("5.1")) == 5100);
  CHECK(k.CudnnRelease(*Version::Parse("9.11.0"))->min_sm == 75);
  CHECK(k.CudnnRelease(*Version::Parse("8.9.7"))->min_sm == 50);
}

TEST_CASE("framework tables: TensorFlow tested builds, PyTorch matrix, acceptance eras") {
  const Knowledge& k = Builtin();
  const auto* tf12 = k.TensorflowBuild(*Version::Parse("1.2.1"));
  REQUIRE(tf12);
  CHECK(tf12->cudnn.str() == "5.1");
  CHECK(tf12->cuda.str() == "8");
  // 2.15's wheel pins nvidia-cudnn-cu12==8.9.4.25 in its and-cuda extra (read from the wheel).
  CHECK(k.TensorflowBuild(*Version::Parse("2.15.0"))->cudnn.str() == "8.9.4.25");
  CHECK(k.TorchBuild(*Version::Parse("2.7.0+cu126"), *Version::Parse("12.6"))->cudnn.str() ==
        "9.5.1.17");
  CHECK_FALSE(k.Acceptance("tensorflow", *Version::Parse("1.2.0"))->minor_at_least);
  CHECK(k.Acceptance("tensorflow", *Version::Parse("1.12.0"))->minor_at_least_from_major == 7);
  CHECK(k.Acceptance("tensorflow", *Version::Parse("2.16.1"))->minor_at_least);
  CHECK(k.Acceptance("torch", *Version::Parse("2.3.0"))->version_format == "tuple");
  CHECK(k.SmFloor("torch", *Version::Parse("9.11.0"))->min_sm == 75);
  CHECK_FALSE(k.SmFloor("torch", *Version::Parse("9.10.2")));
  REQUIRE(k.cudnn_sublibraries().size() == 2);
}

TEST_CASE("GPU names and SM spellings") {
  const Knowledge& k = Builtin();
  CHECK(k.GpuSm("sm_86") == 86);
  CHECK(k.GpuSm("8.6") == 86);
  CHECK(k.GpuSm("120") == 120);
  CHECK(k.GpuSm("NVIDIA A100-SXM4-80GB") == 80);
  CHECK(k.GpuSm("NVIDIA A10") == 86);  // a whole word, not the A100 prefix
  CHECK(k.GpuSm("Tesla T4") == 75);
  CHECK(k.GpuSm("h100") == 90);
  CHECK_FALSE(k.GpuSm("Voodoo 3"));
  CHECK(k.ArchName(86) == "Ampere");
}

TEST_CASE("malformed rule files are rejected with file:line") {
  TempDir dir;
  std::filesystem::create_directories(dir / "bad");
  WriteFile(dir / "bad" / "cuda.json",
            "{\n  \"cuda_driver\": {\n    \"rows\": [\n      {\"cuda\": \"12.4\",, }\n");
  std::string m = FatalMessage({IMGCHECK_RULES_DIR, (dir / "bad").string()});
  CHECK(m.rfind((dir / "bad" / "cuda.json").string() + ":4: ", 0) == 0);

  std::filesystem::create_directories(dir / "nosource");
  WriteFile(dir / "nosource" / "cuda.json",
            "{\n  \"cuda_driver\": {\n    \"rows\": [\n      {\"cuda\": \"12.4\", \"min_driver\": "
            "\"550\"}\n    ]\n  }\n}\n");
  m = FatalMessage({IMGCHECK_RULES_DIR, (dir / "nosource").string()});
  CHECK(m == (dir / "nosource" / "cuda.json").string() +
                 ":4: row has no \"source\": every fact must say where it comes from");

  std::filesystem::create_directories(dir / "badfield");
  WriteFile(dir / "badfield" / "gpus.json",
            "{\"gpu_names\": {\"rows\": [\n {\"name\": \"X\", \"source\": \"s\",\n  \"sm\": "
            "\"eighty\"}]}}\n");
  m = FatalMessage({IMGCHECK_RULES_DIR, (dir / "badfield").string()});
  CHECK(m == (dir / "badfield" / "gpus.json").string() + ":3: field \"sm\" must be an integer");
}

// The library classification is loaded with the rest: a malformed libraries.json stops the run
// (it used to load, and leave rules::Context's family lookups empty), and a rules directory
// without one is refused.
TEST_CASE("libraries.json is checked when the rule data is loaded") {
  TempDir dir;
  std::filesystem::create_directories(dir / "libs");
  WriteFile(dir / "libs" / "libraries.json",
            "{\"families\": [\n  {\"family\": \"cudnn\", \"kind\": \"cuda-libary\", "
            "\"libraries\": [\"libcudnn\"], \"source\": \"s\"}]}\n");
  std::string m = FatalMessage({IMGCHECK_RULES_DIR, (dir / "libs").string()});
  CHECK(m == (dir / "libs" / "libraries.json").string() +
                 ":2: kind must be \"cuda-library\" or \"driver-library\"");

  std::filesystem::create_directories(dir / "only");
  std::filesystem::copy_file(std::filesystem::path(IMGCHECK_RULES_DIR) / "rules.json",
                             dir / "only" / "rules.json");
  m = FatalMessage({(dir / "only").string()});
  CHECK(m == "no library families: the rules directory has no libraries.json");

  const Knowledge& k = Builtin();
  REQUIRE(k.libraries().Find("cudnn") != nullptr);
  CHECK(k.libraries().Classify("libcudnn_ops")->family == "cudnn");
  CHECK_FALSE(k.dlopen().empty());
}

TEST_CASE(
    "Rule directories given with --rules add rows that win lookups and replace files by name") {
  TempDir dir;
  WriteFile(dir / "extra.json",
            "{\"gpu_names\": {\"rows\": [{\"name\": \"Future GPU 9000\", \"sm\": 130, \"source\": "
            "\"test\"}]}}\n");
  Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR, dir.path().string()});
  CHECK(k.GpuSm("Future GPU 9000") == 130);
  CHECK(k.GpuSm("A100") == 80);  // built-in rows still there
}

TEST_CASE("the data's version: version.json's date and a digest of the content") {
  const DataVersion& v = Builtin().version();
  CHECK(v.schema == kRulesSchema);
  REQUIRE(v.date.size() == 10);
  CHECK(v.digest.size() == 64);
  CHECK(v.str() == v.date + "+" + v.digest.substr(0, 12));

  // The same content, written otherwise (whitespace, another directory), has the same version;
  // one changed fact gives another digest.
  TempDir a, b, c;
  for (const auto& e : std::filesystem::directory_iterator(IMGCHECK_RULES_DIR)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() != ".json") continue;
    nlohmann::json j = nlohmann::json::parse(imgcheck::testing::ReadFile(e.path()));
    WriteFile(a.path() / name, j.dump());
    if (name == "gpus.json") j["gpu_names"]["rows"][0]["sm"] = 99;
    WriteFile(b.path() / name, j.dump(4));
  }
  CHECK(Knowledge::Load({a.path().string()}).version().str() == v.str());
  DataVersion changed = Knowledge::Load({b.path().string()}).version();
  CHECK(changed.date == v.date);
  CHECK(changed.digest != v.digest);

  // An update must move the date to count as newer.
  DataVersion later = v;
  later.date = "2999-01-01";
  CHECK(later.NewerThan(v));
  CHECK_FALSE(changed.NewerThan(v));

  WriteFile(c.path() / "version.json", R"({"schema": 1, "date": "yesterday"})");
  CHECK_THAT(FatalMessage({IMGCHECK_RULES_DIR, c.path().string()}),
             Catch::Contains("version.json:1:") && Catch::Contains("YYYY-MM-DD"));
}

TEST_CASE("the newest release each table knows, and the row it is") {
  auto torch = Builtin().NewestKnown("torch");
  REQUIRE(torch);
  CHECK(torch->version >= *Version::Parse("2.15"));
  CHECK_THAT(torch->row, Catch::StartsWith("torch_builds row torch " + torch->version.str()));
  auto cuda = Builtin().NewestKnown("cuda");
  REQUIRE(cuda);
  CHECK_THAT(cuda->row, Catch::StartsWith("cuda_minor_compat row CUDA " +
                                          std::to_string(cuda->version.major())));
  auto jax = Builtin().NewestKnown("jax-cuda12-plugin");
  REQUIRE(jax);
  CHECK_THAT(jax->row, Catch::StartsWith("jax_plugins fallback row of jax-cuda12-plugin"));
  CHECK(Builtin().NewestKnown("cudnn"));
  CHECK_FALSE(Builtin().NewestKnown("no-such-framework"));
}

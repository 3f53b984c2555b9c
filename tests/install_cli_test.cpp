// Black-box tests of an installed imgcheck: `cmake --install` into a temporary prefix, then the
// installed binary run from another directory with $IMGCHECK_RULES_DIR unset, so it can only
// find its rule data under <prefix>/share/imgcheck/rules. And the two run-time overrides of the
// rule data, $IMGCHECK_RULES_DIR and --rules, for the subcommands that read an image.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "image_writer.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;

namespace {

// A small image: cuDNN 8 and a program that needs it.
struct SmallImage {
  TempDir dir;
  std::string ref;
  SmallImage() {
    SharedObject cudnn;
    cudnn.soname = "libcudnn.so.8";
    Compile(cudnn, dir / "libcudnn.so.8");
    ImageRecipe r;
    r.env = {"PATH=/usr/bin:/bin"};
    r.layers.push_back(MakeLayer({FileFrom("usr/lib64/libcudnn.so.8.9.2", dir / "libcudnn.so.8"),
                                  Symlink("usr/lib64/libcudnn.so.8", "libcudnn.so.8.9.2")},
                                 Compression::kGzip, "COPY cudnn"));
    WriteOciLayout(dir / "layout", r);
    ref = "oci:" + (dir / "layout").string() + ":latest";
  }
};

// `imgcheck ARGS` run in `cwd` with $IMGCHECK_RULES_DIR set to `rules_env` (unset when empty).
CommandResult Imgcheck(const fs::path& binary, const fs::path& cwd, const std::string& args,
                       const std::string& rules_env = "") {
  std::string env = rules_env.empty() ? "env -u IMGCHECK_RULES_DIR "
                                      : "env IMGCHECK_RULES_DIR=" + Quote(rules_env) + " ";
  CommandResult r = Run("cd " + Quote(cwd) + " && " + env + Quote(binary) + " " + args);
  INFO(args << "\n" << r.output);
  return r;
}

// A copy of the built-in rules whose libraries.json names cuDNN's family "cudnn-from-copy".
void WriteRenamedRules(const fs::path& dir) {
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(SourceDir() / "rules"))
    fs::copy_file(e.path(), dir / e.path().filename());
  std::string text = ReadFile(dir / "libraries.json");
  const std::string from = "\"family\": \"cudnn\"";
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), "\"family\": \"cudnn-from-copy\"");
  WriteFile(dir / "libraries.json", text);
}

}  // namespace

TEST_CASE("the installed tree works from any directory without the source tree", "[install]") {
  TempDir prefix, elsewhere;
  CommandResult install = Run(std::string("'") + IMGCHECK_CMAKE + "' --install " +
                              Quote(BinaryDir()) + " --prefix " + Quote(prefix.path()));
  INFO(install.output);
  REQUIRE(install.status == 0);
  fs::path bin = prefix / "bin/imgcheck";
  fs::path rules = prefix / "share/imgcheck/rules";
  REQUIRE(fs::exists(bin));
  CHECK(fs::exists(prefix / "bin/imgcheck-probe"));
  for (const char* name : {"libraries.json", "rules.json", "dlopen.json", "README.md"})
    CHECK(fs::exists(rules / name));

  SmallImage img;
  std::string cache = " --cache-dir " + Quote(elsewhere / "cache");
  CommandResult catalog = Imgcheck(bin, elsewhere.path(), "catalog -q " + img.ref + cache);
  CHECK(catalog.status == 0);
  CHECK(catalog.output.find("libcudnn") != std::string::npos);
  CommandResult why =
      Imgcheck(bin, elsewhere.path(), "why -q " + img.ref + " libcudnn.so.8" + cache);
  CHECK((why.status == 0 || why.status == 1));
  CHECK(why.output.find("cannot read") == std::string::npos);
  CommandResult scan = Imgcheck(bin, elsewhere.path(), "scan -q " + img.ref + cache);
  CHECK((scan.status == 0 || scan.status == 1));
  CHECK(scan.output.find("IC051") != std::string::npos);  // the unmanaged libcudnn
  CommandResult list = Imgcheck(bin, elsewhere.path(), "rules list");
  CHECK(list.status == 0);
  CHECK(list.output.find("IC001") != std::string::npos);

  // `version` names the build and the rule data this installed copy reads.
  CommandResult version = Imgcheck(bin, elsewhere.path(), "version --format json");
  REQUIRE(version.status == 0);
  auto v = nlohmann::json::parse(version.output);
  CHECK(v["name"] == "imgcheck");
  std::string number = v["version"];
  CHECK(std::regex_match(number, std::regex(R"(\d+\.\d+\.\d+([-+~][0-9A-Za-z.+~-]+)?)")));
  CHECK(std::regex_match(std::string(v["commit"]), std::regex("[0-9a-f]{40}|unknown")));
  CHECK(v["rules"]["dir"] == fs::canonical(rules).string());
  std::string digest = v["rules"]["digest"];
  CHECK(std::regex_match(digest, std::regex("sha256:[0-9a-f]{64}")));
  CommandResult text = Imgcheck(bin, elsewhere.path(), "version");
  CHECK(text.status == 0);
  CHECK(text.output.starts_with("imgcheck " + number + "\n"));
  CHECK(text.output.find("rules: " + digest) != std::string::npos);
  CHECK(Imgcheck(bin, elsewhere.path(), "--version").output == "imgcheck " + number + "\n");

  // It is the installed copy that was read: break it, and every subcommand says where.
  WriteFile(rules / "libraries.json", "{\n  \"families\": [\n");
  auto changed =
      nlohmann::json::parse(Imgcheck(bin, elsewhere.path(), "version --format json").output);
  CHECK(changed["rules"]["digest"] != digest);
  for (const std::string& args : {"catalog -q " + img.ref + cache, std::string("rules list")}) {
    CommandResult broken = Imgcheck(bin, elsewhere.path(), args);
    CHECK(broken.status == 2);
    CHECK(broken.output.find(fs::canonical(rules / "libraries.json").string() + ":3:") !=
          std::string::npos);
  }
}

TEST_CASE("catalog and why read $IMGCHECK_RULES_DIR and --rules", "[install]") {
  SmallImage img;
  TempDir work;
  WriteRenamedRules(work / "copy");
  fs::path bin = BinaryDir() / "imgcheck";
  std::string image = img.ref + " -q --no-cache";

  // The built-in directory from the environment.
  CommandResult env =
      Imgcheck(bin, work.path(), "catalog --format json " + image, (work / "copy").string());
  CHECK(env.status == 0);
  CHECK(env.output.find("\"cudnn-from-copy\"") != std::string::npos);
  // A --rules directory whose libraries.json replaces the built-in one.
  fs::create_directories(work / "override");
  fs::copy_file(work / "copy/libraries.json", work / "override/libraries.json");
  CommandResult over = Imgcheck(
      bin, work.path(), "catalog --format json --rules " + Quote(work / "override") + " " + image);
  CHECK(over.status == 0);
  CHECK(over.output.find("\"cudnn-from-copy\"") != std::string::npos);
  CommandResult plain = Imgcheck(bin, work.path(), "catalog --format json " + image);
  CHECK(plain.status == 0);
  CHECK(plain.output.find("\"cudnn\"") != std::string::npos);
  CHECK(plain.output.find("cudnn-from-copy") == std::string::npos);

  // why reads them too: a malformed file in either place stops it with file:line.
  fs::create_directories(work / "bad");
  WriteFile(work / "bad/dlopen.json", "{\n  \"dlopen\": {\"rows\": [\n    {\"caller\": 1}]}}\n");
  CommandResult bad_rules = Imgcheck(
      bin, work.path(), "why --rules " + Quote(work / "bad") + " " + image + " libcudnn.so.8");
  CHECK(bad_rules.status == 2);
  CHECK(bad_rules.output.find((work / "bad/dlopen.json").string() + ":3:") != std::string::npos);
  WriteFile(work / "copy/dlopen.json", "{\"dlopen\": [}");
  CommandResult bad_env =
      Imgcheck(bin, work.path(), "why " + image + " libcudnn.so.8", (work / "copy").string());
  CHECK(bad_env.status == 2);
  CHECK(bad_env.output.find((work / "copy/dlopen.json").string() + ":1:") != std::string::npos);
  CommandResult why = Imgcheck(bin, work.path(), "why " + image + " libcudnn.so.8");
  CHECK((why.status == 0 || why.status == 1));
}

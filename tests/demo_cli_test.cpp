// The README's demo image (testdata/demo) through the built binary: the failure it was made to
// show is found, and `why` explains it the way libtree would.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "support.h"

using namespace imgcheck::testing;
using Catch::Matchers::Contains;

namespace {

// `imgcheck COMMAND DEMO-IMAGE ARGS`
std::string Imgcheck(const std::string& command, const std::string& args = "") {
  return "'" + (BinaryDir() / "imgcheck").string() + "' " + command + " --quiet --no-cache oci:'" +
         (BinaryDir() / "demo/image").string() + ":latest' " + args;
}

}  // namespace

TEST_CASE("the demo image reports the shadowing cuDNN and the driver stub", "[cli][demo]") {
  CommandResult r = Run(Imgcheck("scan", "--format json"));
  INFO(r.output);
  REQUIRE(r.status == 1);
  auto report = nlohmann::json::parse(r.output.substr(0, r.output.rfind('}') + 1));
  REQUIRE(report["findings"].is_array());
  std::vector<std::string> rules;
  for (const auto& f : report["findings"]) rules.push_back(f["rule"]);
  CHECK(std::count(rules.begin(), rules.end(), "IC001") == 1);
  CHECK(std::count(rules.begin(), rules.end(), "IC020") == 1);
  for (const auto& f : report["findings"])
    if (f["rule"] == "IC001") {
      CHECK_THAT(f["message"].get<std::string>(), Contains("5005 (compatibility version 5000)"));
      CHECK(f["paths"][0] == "/opt/cudnn/lib64/libcudnn.so.5.0.5");
      CHECK(f["layer"]["created_by"] == "COPY cudnn-5.0.5/lib64 /opt/cudnn/lib64");
    }
}

TEST_CASE("why explains the dlopen that LD_LIBRARY_PATH sends to the old cuDNN", "[cli][why]") {
  CommandResult found = Run(Imgcheck("why", "libcudnn.so.5"));
  INFO(found.output);
  CHECK(found.status == 0);
  CHECK_THAT(found.output, Contains("dlopen by /usr/local/lib/python3.5/dist-packages/tensorflow"));
  CHECK_THAT(found.output, Contains("=> /opt/cudnn/lib64/libcudnn.so.5"));
  CHECK_THAT(found.output, Contains("LD_LIBRARY_PATH element \"/opt/cudnn/lib64\""));
  CHECK_THAT(found.output, Contains("real file /opt/cudnn/lib64/libcudnn.so.5.0.5"));

  CommandResult nobody = Run(Imgcheck("why", "libcudnn.so.8"));
  INFO(nobody.output);
  CHECK(nobody.status == 1);
  CHECK_THAT(nobody.output, Contains("no object in the image's link maps requests it"));
}

TEST_CASE("dockerfile: the demo's findings on the lines of testdata/demo/Dockerfile",
          "[cli][demo]") {
  CommandResult r =
      Run(Imgcheck("scan", "--format json --dockerfile '" +
                               (SourceDir() / "testdata/demo/Dockerfile").string() + "'"));
  INFO(r.output);
  CHECK(r.status == 1);
  auto report = nlohmann::json::parse(r.output.substr(0, r.output.rfind('}') + 1));
  std::map<std::string, int> line;
  for (const auto& f : report["findings"])
    if (f["dockerfile"].is_object()) line[f["rule"]] = f["dockerfile"]["line"];
  CHECK(line["IC001"] == 7);  // COPY cudnn-5.0.5/lib64 /opt/cudnn/lib64
  CHECK(line["IC020"] == 4);  // the stub is the base image's; the ENV put it on the path
}

// The README's demo report is this test's output: the text report of testdata/demo, as a user
// who ran the README's commands sees it. IMGCHECK_UPDATE_GOLDEN=1 rewrites both after a
// deliberate change.
TEST_CASE("the README shows the demo image's text report as it is", "[cli][demo]") {
  CommandResult r =
      Run("cd '" + BinaryDir().string() + "' && NO_COLOR=1 '" +
          (BinaryDir() / "imgcheck").string() + "' scan --quiet --no-cache oci:demo/image:latest");
  INFO(r.output);
  CHECK(r.status == 1);
  const auto golden = SourceDir() / "testdata/golden/demo.txt";
  const auto readme = SourceDir() / "README.md";
  const std::string begin = "<!-- demo report (tests/demo_cli_test.cpp) -->\n```text\n";
  std::string text = ReadFile(readme);
  size_t from = text.find(begin);
  REQUIRE(from != std::string::npos);
  from += begin.size();
  size_t to = text.find("```\n", from);
  REQUIRE(to != std::string::npos);
  if (std::getenv("IMGCHECK_UPDATE_GOLDEN")) {
    WriteFile(golden, r.output);
    WriteFile(readme, text.replace(from, to - from, r.output));
    text = ReadFile(readme);
    to = from + r.output.size();
  }
  CHECK(ReadFile(golden) == r.output);
  CHECK(text.substr(from, to - from) == r.output);
  // What a person reads first: the verdict, then the two problems, each with its fix.
  CHECK_THAT(r.output.substr(0, r.output.find('\n')), Contains("FAIL (exit 1"));
  CHECK_THAT(r.output, Contains("\nerror   IC001 cudnn-version-mismatch\n"));
  CHECK_THAT(r.output, Contains("fix: "));
  CHECK_THAT(r.output, !Contains("searched:"));  // evidence only with --verbose
  CommandResult verbose = Run(Imgcheck("scan", "--verbose"));
  CHECK_THAT(verbose.output,
             Contains("resolved libcudnn.so.5: /opt/cudnn/lib64/libcudnn.so.5.0.5"));
}

TEST_CASE("dockerfile: an inline ignore on the line before an instruction", "[cli][demo]") {
  TempDir dir;
  std::string text = ReadFile(SourceDir() / "testdata/demo/Dockerfile");
  // Before the ENV line (4), which IC020 points at: the comment becomes line 4.
  size_t env = text.find("ENV LD_LIBRARY_PATH");
  WriteFile(dir / "Dockerfile",
            text.substr(0, env) +
                "# imgcheck ignore=IC020 reason=\"stub kept for the CI linker\"\n" +
                text.substr(env));
  CommandResult r =
      Run(Imgcheck("scan", "--format json --dockerfile '" + (dir / "Dockerfile").string() + "'"));
  INFO(r.output);
  auto report = nlohmann::json::parse(r.output.substr(0, r.output.rfind('}') + 1));
  for (const auto& f : report["findings"]) CHECK(f["rule"] != "IC020");
  bool ignored = false;
  for (const auto& s : report["suppressed"])
    if (s["rule"] == "IC020") {
      ignored = true;
      CHECK(s["ignored_by"]["reason"] == "stub kept for the CI linker");
      CHECK(s["ignored_by"]["where"].get<std::string>().ends_with("Dockerfile:4"));
    }
  CHECK(ignored);
  CHECK(r.status == 1);  // IC001 still fails the run
  // Without a reason the line is refused, as an ignore in the config file would be.
  WriteFile(dir / "Dockerfile",
            text.substr(0, env) + "# imgcheck ignore=IC020\n" + text.substr(env));
  CommandResult bare =
      Run(Imgcheck("scan", "--dockerfile '" + (dir / "Dockerfile").string() + "' 2>&1"));
  CHECK(bare.status == 2);
  CHECK_THAT(bare.output, Contains("needs reason="));
}

// Golden tests: a fixed report rendered in every format, compared byte for byte with
// testdata/golden/report.*. Regenerate with IMGCHECK_UPDATE_GOLDEN=1 after a deliberate change.
#include "report/report.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "support.h"

using namespace imgcheck;
using imgcheck::testing::ReadFile;
using imgcheck::testing::SourceDir;
using imgcheck::testing::WriteFile;

namespace {

const rules::Knowledge& SmallTable() {
  static const rules::Knowledge k = [] {
    auto file = rules::ParseDataFile("rules.json", R"json({"rules": {"rows": [
      {"id": "IC001", "name": "cudnn-version-mismatch", "severity": "error",
       "summary": "A framework's compiled cuDNN is not accepted by the cuDNN it loads.",
       "breaks": "The framework checks the loaded cuDNN at the first DNN op.",
       "errors": ["Loaded runtime CuDNN library: 5005 (compatibility version 5000) but source was compiled with 5100 (compatibility version 5100)."],
       "remediation": "Make the matching cuDNN the one found first.", "source": "test"},
      {"id": "IC051", "name": "unmanaged-library", "severity": "info",
       "summary": "A CUDA library no package owns.", "breaks": "Invisible to upgrades.",
       "errors": ["(none)"], "remediation": "Install it from a package.", "source": "test"},
      {"id": "IC060", "name": "unsafe-library-path", "severity": "warning",
       "summary": "LD_LIBRARY_PATH has empty, relative or missing entries.", "breaks": "Searches the cwd.",
       "errors": ["(none)"], "remediation": "Use absolute directories.", "source": "test"}
    ]}})json");
    std::vector<rules::DataFile> files;
    files.push_back(std::move(*file));
    return rules::Knowledge::FromFiles(std::move(files));
  }();
  return k;
}

report::Report Fixed() {
  report::Report r;
  r.image = {"oci:/tmp/seed:latest", "oci",
             "sha256:1111111111111111111111111111111111111111111111111111111111111111",
             "sha256:2222222222222222222222222222222222222222222222222222222222222222",
             "linux/amd64"};
  r.knowledge = &SmallTable();
  r.tool_version = "0.1.0";
  rules::Finding a;
  a.rule = "IC001";
  a.name = "cudnn-version-mismatch";
  a.severity = rules::Severity::kError;
  a.message =
      "tensorflow-gpu 1.2.0 was compiled with cuDNN 5.1 but loads cuDNN 5.0.5 from "
      "/usr/local/cudnn/lib64/libcudnn.so.5.0.5 & rejects it: \"5005\" <5100>";
  a.paths = {"/usr/local/cudnn/lib64/libcudnn.so.5.0.5",
             "/usr/lib/python3/dist-packages/tensorflow/python/platform/build_info.py"};
  a.layer = {2, "sha256:3333333333333333333333333333333333333333333333333333333333333333",
             "COPY cudnn /usr/local/cudnn"};
  a.remediation = "Make the matching cuDNN the one found first.";
  loader::Resolution cudnn;
  cudnn.name = "libcudnn.so.5";
  cudnn.status = loader::Status::kFound;
  cudnn.reason = loader::Reason::kLdLibraryPath;
  cudnn.entry = "/usr/local/cudnn/lib64";
  cudnn.path = "/usr/local/cudnn/lib64/libcudnn.so.5";
  cudnn.real_path = "/usr/local/cudnn/lib64/libcudnn.so.5.0.5";
  a.evidence = {{"compiled cuDNN", "5.1 (TensorFlow 1.2.0 tested build configuration)"},
                rules::ResolvedEvidence(cudnn)};
  rules::Finding b;
  b.rule = "IC060";
  b.name = "unsafe-library-path";
  b.severity = rules::Severity::kWarning;
  b.message = "LD_LIBRARY_PATH=:/opt/x: element 1 is empty (the working directory)";
  b.remediation = "Use absolute directories.";
  rules::Finding c;
  c.rule = "IC051";
  c.name = "unmanaged-library";
  c.severity = rules::Severity::kInfo;
  c.message = "1 CUDA library in /usr/local/cudnn/lib64 belongs to no package: libcudnn.so.5.0.5";
  c.paths = {"/usr/local/cudnn/lib64/libcudnn.so.5.0.5"};
  c.layer = {2, "sha256:3333333333333333333333333333333333333333333333333333333333333333",
             "COPY cudnn /usr/local/cudnn"};
  c.remediation = "Install it from a package.";
  r.findings = {a, b, c};
  rules::Finding d = c;
  d.paths = {"/opt/vendor/libcublas.so.12"};
  r.suppressed = {{d, {"IC051", "/opt/vendor/**", "vendored on purpose", ".imgcheck.yaml:3"}}};
  r.notes = {"IC030 (driver-too-old) stays silent: no target driver (--driver VERSION or --host)"};
  return r;
}

void Golden(const std::string& name, const std::string& actual) {
  auto path = SourceDir() / "testdata" / "golden" / name;
  if (std::getenv("IMGCHECK_UPDATE_GOLDEN")) WriteFile(path, actual);
  CHECK(ReadFile(path) == actual);
}

}  // namespace

TEST_CASE("golden: text") { Golden("report.txt", report::Render(Fixed(), report::Format::kText)); }

TEST_CASE("golden: text with colour on a terminal") {
  Golden("report.color.txt", report::Render(Fixed(), report::Format::kText, {true}));
}

TEST_CASE("golden: json") {
  std::string out = report::Render(Fixed(), report::Format::kJson);
  Golden("report.json", out);
  auto j = nlohmann::json::parse(out);
  CHECK(j["image"]["reference"] == "oci:/tmp/seed:latest");
  CHECK(j["findings"][0]["layer"]["index"] == 2);
  CHECK(j["findings"][1]["layer"].is_null());
}

TEST_CASE("golden: sarif") {
  std::string out = report::Render(Fixed(), report::Format::kSarif);
  Golden("report.sarif", out);
  auto j = nlohmann::json::parse(out);
  CHECK(j["version"] == "2.1.0");
  const auto& run = j["runs"][0];
  CHECK(run["tool"]["driver"]["rules"].size() == 3);
  CHECK(run["results"][0]["ruleId"] == "IC001");
  CHECK(run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] ==
        "/usr/local/cudnn/lib64/libcudnn.so.5.0.5");
  CHECK(run["results"][2]["level"] == "note");
}

TEST_CASE("golden: junit") {
  Golden("report.junit.xml", report::Render(Fixed(), report::Format::kJunit));
}

TEST_CASE("the format table") {
  CHECK(report::ParseFormat("sarif") == report::Format::kSarif);
  CHECK_FALSE(report::ParseFormat("yaml"));
  CHECK(report::FormatNames() == "text|json|sarif|junit");
}

TEST_CASE("a resolution as evidence: found, not found with the directories tried, an error") {
  using loader::Outcome;
  using loader::Reason;
  loader::Resolution r;
  r.name = "libx.so.1";
  r.status = loader::Status::kFound;
  r.reason = Reason::kDirectPath;
  r.path = r.real_path = r.entry = "/opt/libx.so.1";
  CHECK(report::ResolutionText(r) == "/opt/libx.so.1 (direct-path)");
  r.reason = Reason::kLdCache;
  r.entry = "/etc/ld.so.cache";
  CHECK(report::ResolutionText(r) == "/opt/libx.so.1 (ld.so.cache /etc/ld.so.cache)");
  r.status = loader::Status::kNotFound;
  CHECK(report::ResolutionText(r) == "not found");
  r.tried = {{Reason::kRunpath, "/a", "/a/libx.so.1", Outcome::kMissing},
             {Reason::kDefaultDir, "/b", "/b/libx.so.1", Outcome::kMissing},
             {Reason::kDefaultDir, "/a", "/a/libx.so.1", Outcome::kMissing}};
  CHECK(report::ResolutionText(r) == "not found; tried /a /b");
  r.status = loader::Status::kError;
  r.error = "invalid ELF header";
  CHECK(report::ResolutionText(r) == "error: invalid ELF header");
  CHECK(report::EvidenceValue(rules::ResolvedEvidence(r)) == "error: invalid ELF header");
  CHECK(report::EvidenceValue({"compiled cuDNN", "8.9"}) == "8.9");
}

// Golden tests: a fixed report rendered in every format, compared byte for byte with
// testdata/golden/report.*. Regenerate with IMGCHECK_UPDATE_GOLDEN=1 after a deliberate change.
#include "report/report.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "support.h"

using namespace imgcheck;
using imgcheck::testing::ReadFile;
using imgcheck::testing::Run;
using imgcheck::testing::SourceDir;
using imgcheck::testing::TempDir;
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
  r.rules_version = "2026-11-23+0123456789ab";
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
  a.fingerprint = "fp-ic001";  // scan::AssignFingerprints' work, tested in scan_test
  b.fingerprint = "fp-ic060";
  c.fingerprint = "fp-ic051";
  r.findings = {a, b, c};
  rules::Finding d = c;
  d.paths = {"/opt/vendor/libcublas.so.12"};
  d.fingerprint = "fp-ic051-vendor";
  r.suppressed = {{d, {"IC051", "/opt/vendor/**", "vendored on purpose", ".imgcheck.yaml:3"}}};
  r.notes = {"IC030 (driver-too-old) stays silent: no target driver (--driver VERSION or --host)"};
  r.not_run = {{"IC030", "no target driver (--driver VERSION or --host)", true},
               {"IC070", "checked only by the GPU probe (imgcheck scan --probe)", false}};
  return r;
}

void Golden(const std::string& name, const std::string& actual) {
  auto path = SourceDir() / "testdata" / "golden" / name;
  if (std::getenv("IMGCHECK_UPDATE_GOLDEN")) WriteFile(path, actual);
  CHECK(ReadFile(path) == actual);
}

}  // namespace

TEST_CASE("golden: text") { Golden("report.txt", report::Render(Fixed(), report::Format::kText)); }

TEST_CASE("text: summary first, evidence and quiet findings only with --verbose") {
  report::Report r = Fixed();
  r.findings[2].quiet = true;  // IC051 on an NVIDIA release layout
  std::string plain = report::Render(r, report::Format::kText);
  std::string first = plain.substr(0, plain.find('\n'));
  CHECK(first.find("1 error, 1 warning, 1 info (1 suppressed, 1 quiet); FAIL") !=
        std::string::npos);
  CHECK(plain.find("IC051") == std::string::npos);
  CHECK(plain.find("resolved libcudnn.so.5") == std::string::npos);
  CHECK(plain.find("1 quiet finding hidden") != std::string::npos);
  // Rules left silent for lack of a target: one line; the probe's rules are not a note.
  CHECK(plain.find("note: not checked: IC030: no target driver") != std::string::npos);
  CHECK(plain.find("stays silent") == std::string::npos);
  CHECK(plain.find("IC070") == std::string::npos);
  report::RenderOptions verbose;
  verbose.verbose = true;
  std::string all = report::Render(r, report::Format::kText, verbose);
  CHECK(all.find("IC051 unmanaged-library (quiet)") != std::string::npos);
  CHECK(all.find("resolved libcudnn.so.5: /usr/local/cudnn/lib64/libcudnn.so.5.0.5") !=
        std::string::npos);
  CHECK(all.find("layer 2 sha256:333333333333: COPY") != std::string::npos);
  // An image without CUDA: nothing those rules would check, so no note about them.
  report::Report empty = Fixed();
  empty.findings.clear();
  empty.cuda_stack = false;
  std::string none = report::Render(empty, report::Format::kText);
  CHECK(none.find("note:") == std::string::npos);
  CHECK(none.find("no findings (1 suppressed); PASS (exit 0, --fail-on error)") !=
        std::string::npos);
  CHECK(none.find("no CUDA stack found") != std::string::npos);
  // The verdict follows the gate: --fail-on none passes whatever was found.
  report::Report lenient = Fixed();
  lenient.fail_on = rules::FailOn{};
  CHECK(report::Verdict(lenient) == "PASS (exit 0, --fail-on none)");
}

TEST_CASE("golden: text with colour on a terminal") {
  Golden("report.color.txt", report::Render(Fixed(), report::Format::kText, {true}));
}

TEST_CASE("golden: json") {
  std::string out = report::Render(Fixed(), report::Format::kJson);
  Golden("report.json", out);
  auto j = nlohmann::json::parse(out);
  CHECK(j["image"]["reference"] == "oci:/tmp/seed:latest");
  CHECK(j["tool"]["rules_version"] == "2026-11-23+0123456789ab");
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
  // The rule data that judged the results, as a tool component of its own.
  CHECK(run["tool"]["extensions"][0]["name"] == "imgcheck-rules");
  CHECK(run["tool"]["extensions"][0]["version"] == "2026-11-23+0123456789ab");
  CHECK(run["results"][0]["ruleId"] == "IC001");
  // Without --dockerfile no file of the repository is to blame: the path inside the image, as
  // a logical location and relative to the image's root (GitHub requires a physical location).
  const auto& where = run["results"][0]["locations"][0];
  CHECK(where["logicalLocations"][0]["fullyQualifiedName"] ==
        "/usr/local/cudnn/lib64/libcudnn.so.5.0.5");
  CHECK(where["physicalLocation"]["artifactLocation"]["uri"] ==
        "usr/local/cudnn/lib64/libcudnn.so.5.0.5");
  CHECK(where["physicalLocation"]["artifactLocation"]["uriBaseId"] == "IMAGE_ROOT");
  CHECK(run["originalUriBaseIds"].contains("IMAGE_ROOT"));
  CHECK(run["results"][1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == ".");
  CHECK(run["results"][2]["level"] == "note");
  CHECK(run["automationDetails"]["id"] == "imgcheck/oci:/tmp/seed:latest/");
  CHECK(run["tool"]["driver"]["rules"][0]["helpUri"] ==
        "https://github.com/imgcheck/imgcheck/blob/main/rules/"
        "README.md#ic001-cudnn-version-mismatch");
  // The ignored finding is a result too, suppressed with its reason.
  REQUIRE(run["results"].size() == 4);
  const auto& sup = run["results"][3]["suppressions"][0];
  CHECK(sup["kind"] == "external");
  CHECK(sup["justification"] == "vendored on purpose (.imgcheck.yaml:3)");
  CHECK_FALSE(run["results"][0].contains("suppressions"));
}

namespace {

// Fixed() as a scan with --dockerfile maps it.
report::Report WithDockerfile() {
  report::Report r = Fixed();
  r.dockerfile = true;
  r.findings[0].dockerfile =
      rules::SourceLine{"docker/gpu image/Dockerfile", 7, 8, "COPY cudnn /usr/local/cudnn"};
  r.findings[1].env = "LD_LIBRARY_PATH";
  r.findings[1].dockerfile =
      rules::SourceLine{"docker/gpu image/Dockerfile", 3, 3, "ENV LD_LIBRARY_PATH=:/opt/x"};
  r.findings[1].written_by =
      rules::SourceLine{"docker/gpu image/Dockerfile", 5, 5, "COPY x /opt/x"};
  return r;
}

// Runs testdata/sarif/validate.py (python3-jsonschema, the OASIS schema) over `sarif`.
void RequireValidSarif(const std::string& sarif) {
  TempDir dir;
  WriteFile(dir / "out.sarif", sarif);
  auto r = Run("python3 '" + (SourceDir() / "testdata/sarif/validate.py").string() + "' '" +
               (dir / "out.sarif").string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
}

}  // namespace

TEST_CASE("sarif: valid against the OASIS SARIF 2.1.0 schema") {
  RequireValidSarif(report::Render(Fixed(), report::Format::kSarif));
  RequireValidSarif(report::Render(WithDockerfile(), report::Format::kSarif));
  report::Report empty = Fixed();
  empty.findings.clear();
  empty.suppressed.clear();
  RequireValidSarif(report::Render(empty, report::Format::kSarif));
}

TEST_CASE("sarif: Dockerfile lines as physical locations, fingerprints that do not move") {
  auto j = nlohmann::json::parse(report::Render(WithDockerfile(), report::Format::kSarif));
  const auto& results = j["runs"][0]["results"];
  const auto& loc = results[0]["locations"][0];
  CHECK(loc["physicalLocation"]["artifactLocation"]["uri"] == "docker/gpu%20image/Dockerfile");
  CHECK(loc["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%");
  CHECK(loc["physicalLocation"]["region"]["startLine"] == 7);
  CHECK(loc["physicalLocation"]["region"]["endLine"] == 8);
  CHECK(loc["logicalLocations"][0]["fullyQualifiedName"] ==
        "/usr/local/cudnn/lib64/libcudnn.so.5.0.5");
  CHECK(results[1]["locations"][0]["logicalLocations"][0]["name"] == "LD_LIBRARY_PATH");
  CHECK(results[1]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3);
  // Caused by the ENV on line 3; the COPY that wrote the file is a related location.
  REQUIRE(results[1]["relatedLocations"].size() == 1);
  CHECK(results[1]["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 5);
  CHECK_FALSE(results[0].contains("relatedLocations"));
  // The fingerprint is the finding's own, whatever the order of the results.
  report::Report moved = WithDockerfile();
  std::swap(moved.findings[0], moved.findings[2]);
  auto after = nlohmann::json::parse(report::Render(moved, report::Format::kSarif));
  CHECK(after["runs"][0]["results"][2]["partialFingerprints"] ==
        nlohmann::json{{"imgcheck/v2", "fp-ic001"}});
  CHECK(after["runs"][0]["results"][3]["partialFingerprints"]["imgcheck/v2"] == "fp-ic051-vendor");
  CHECK_FALSE(after["runs"][0]["results"][0].contains("baselineState"));
}

TEST_CASE("baseline: SARIF baselineState, JSON, text, the verdict and JUnit leave it out") {
  report::Report r = Fixed();
  r.baseline = true;
  r.findings[0].baseline = true;  // the error was there before; the warning is new
  r.fail_on = rules::FailOn{rules::Severity::kWarning};
  auto sarif = nlohmann::json::parse(report::Render(r, report::Format::kSarif));
  const auto& results = sarif["runs"][0]["results"];
  CHECK(results[0]["baselineState"] == "unchanged");
  CHECK(results[1]["baselineState"] == "new");
  RequireValidSarif(report::Render(r, report::Format::kSarif));
  auto json = nlohmann::json::parse(report::Render(r, report::Format::kJson));
  CHECK(json["findings"][0]["baseline"] == true);
  CHECK(json["findings"][1]["baseline"] == false);
  CHECK(json["findings"][0]["fingerprint"] == "fp-ic001");
  CHECK(report::Verdict(r) ==
        "FAIL (exit 1: 1 new finding at or above --fail-on warning, 1 in the baseline)");
  CHECK(report::Fails(r, r.findings[1]));
  CHECK_FALSE(report::Fails(r, r.findings[0]));
  std::string text = report::Render(r, report::Format::kText);
  CHECK(text.find("IC001 cudnn-version-mismatch (in the baseline)") != std::string::npos);
  CHECK(text.find("IC060 unsafe-library-path (in the baseline)") == std::string::npos);
  std::string junit = report::Render(r, report::Format::kJunit);
  CHECK(junit.find("failures=\"1\"") != std::string::npos);
  // Only the warning new: with --fail-on error, nothing new fails.
  r.fail_on = rules::FailOn{rules::Severity::kError};
  CHECK(report::Verdict(r) == "PASS (exit 0, --fail-on error, 1 in the baseline)");
}

TEST_CASE("junit agrees with --fail-on, rules that could not run are skipped") {
  report::Report r = Fixed();
  // A rule with a finding ran, whatever the list says: neither is skipped yet.
  r.not_run = {{"IC051", "never: it has a finding"}, {"IC060", "no target"}};
  r.fail_on = rules::FailOn{rules::Severity::kWarning};
  std::string warn = report::Render(r, report::Format::kJunit);
  CHECK(warn.find("failures=\"2\" errors=\"0\" skipped=\"0\"") != std::string::npos);
  r.findings.erase(r.findings.begin() + 1);  // IC060's finding gone: skipped, with the reason
  r.fail_on = rules::FailOn{};               // none: nothing fails
  std::string none = report::Render(r, report::Format::kJunit);
  CHECK(none.find("failures=\"0\" errors=\"0\" skipped=\"1\"") != std::string::npos);
  CHECK(none.find("<skipped message=\"no target\"/>") != std::string::npos);
  CHECK(none.find("<failure") == std::string::npos);
  CHECK(none.find("<system-out>[error] IC001 tensorflow-gpu") != std::string::npos);
}

TEST_CASE("junit is valid against the Jenkins and the Ant (JUnit 5) schemas") {
  if (!imgcheck::testing::HaveProgram("xmllint"))
    return imgcheck::testing::Skip("xmllint (libxml2-utils) not installed");
  TempDir dir;
  report::Report failing = Fixed();
  failing.timestamp = "2026-11-25T14:00:00";
  report::Report skipped = Fixed();
  skipped.findings.erase(skipped.findings.begin() + 1);
  skipped.not_run = {{"IC060", "no target driver (--driver VERSION or --host)", true}};
  report::Report clean = Fixed();
  clean.findings.clear();
  int n = 0;
  for (const report::Report* r : {&failing, &skipped, &clean}) {
    auto xml = dir.path() / ("r" + std::to_string(n++) + ".xml");
    WriteFile(xml, report::Render(*r, report::Format::kJunit));
    for (const char* xsd : {"jenkins-junit-10.xsd", "ant-junit.xsd"}) {
      auto run =
          Run("xmllint --noout --schema '" + (SourceDir() / "testdata/junit" / xsd).string() +
              "' '" + xml.string() + "' 2>&1");
      INFO(xsd << ": " << run.output);
      CHECK(run.status == 0);
    }
  }
  // The validator does reject what the old report wrote (testsuites@skipped for Jenkins).
  auto bad = dir.path() / "bad.xml";
  WriteFile(bad,
            "<testsuites skipped=\"0\"><testsuite name=\"x\" tests=\"0\" failures=\"0\" "
            "errors=\"0\"/></testsuites>\n");
  CHECK(Run("xmllint --noout --schema '" +
            (SourceDir() / "testdata/junit/jenkins-junit-10.xsd").string() + "' '" + bad.string() +
            "' 2>/dev/null")
            .status != 0);
}

TEST_CASE("codequality: GitLab's fields, on the Dockerfile line when there is one") {
  auto plain = nlohmann::json::parse(report::Render(Fixed(), report::Format::kCodeQuality));
  REQUIRE(plain.size() == 3);  // the ignored finding is left out
  CHECK(plain[0]["check_name"] == "IC001");
  CHECK(plain[0]["severity"] == "critical");
  CHECK(plain[1]["severity"] == "major");
  CHECK(plain[2]["severity"] == "info");
  CHECK(plain[0]["location"]["path"] == "/usr/local/cudnn/lib64/libcudnn.so.5.0.5");
  CHECK(plain[0]["location"]["lines"]["begin"] == 1);
  CHECK(plain[0]["description"].get<std::string>().rfind("IC001 cudnn-version-mismatch: ", 0) == 0);
  auto mapped =
      nlohmann::json::parse(report::Render(WithDockerfile(), report::Format::kCodeQuality));
  CHECK(mapped[0]["location"]["path"] == "docker/gpu image/Dockerfile");
  CHECK(mapped[0]["location"]["lines"]["begin"] == 7);
  CHECK(mapped[0]["fingerprint"] == plain[0]["fingerprint"]);
  std::set<std::string> unique;
  for (const auto& i : plain) unique.insert(i["fingerprint"].get<std::string>());
  CHECK(unique.size() == 3);
}

TEST_CASE("text and json name the Dockerfile line") {
  std::string text = report::Render(WithDockerfile(), report::Format::kText);
  CHECK(text.find("  docker/gpu image/Dockerfile:7: COPY cudnn /usr/local/cudnn\n") !=
        std::string::npos);
  auto j = nlohmann::json::parse(report::Render(WithDockerfile(), report::Format::kJson));
  CHECK(j["findings"][0]["dockerfile"]["line"] == 7);
  CHECK(j["findings"][0]["dockerfile"]["end_line"] == 8);
  CHECK(j["findings"][2]["dockerfile"].is_null());  // --dockerfile given, finding not mapped
  auto plain = nlohmann::json::parse(report::Render(Fixed(), report::Format::kJson));
  CHECK_FALSE(plain["findings"][0].contains("dockerfile"));
}

TEST_CASE("golden: junit") {
  Golden("report.junit.xml", report::Render(Fixed(), report::Format::kJunit));
}

TEST_CASE("the format table") {
  CHECK(util::ParseFormat(report::kFormats, "sarif") == report::Format::kSarif);
  CHECK_FALSE(util::ParseFormat(report::kFormats, "yaml"));
  CHECK(util::FormatNames(report::kFormats) == "text|json|sarif|junit|codequality|markdown");
  CHECK(util::ParseFormat(report::kFormats, "codequality") == report::Format::kCodeQuality);
  CHECK(util::UnknownFormat(report::kFormats, "xml") ==
        "unknown format 'xml' (text|json|sarif|junit|codequality|markdown)");
  CHECK(util::UnknownFormat(report::kFormats, "json").empty());
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

TEST_CASE("text with colour: the only escape sequences are the report's own") {
  // Every image-controlled field of a finding holds an ESC sequence: none may reach the terminal
  // raw, even where the report paints.
  const std::string esc = "\x1b]0;pwned\x07";
  report::Report r = WithDockerfile();
  r.image.reference += esc;
  r.image.manifest_digest += esc;
  for (auto& f : r.findings) {
    f.rule += esc;
    f.name += esc;
    f.message += esc;
    for (auto& p : f.paths) p += esc;
    f.layer.digest = esc + f.layer.digest;
    f.layer.created_by += esc;
    f.remediation += esc;
    for (auto& e : f.evidence) e.label += esc;
    if (f.dockerfile) {
      f.dockerfile->path += esc;
      f.dockerfile->instruction += esc;
    }
  }
  r.diagnostics.push_back({"/usr/lib/x" + esc, 1, "corrupt" + esc});
  r.notes.push_back("note" + esc);
  std::string text = report::Render(r, report::Format::kText, {true});
  for (const char* sgr : {"\033[1;31m", "\033[1;33m", "\033[1;36m", "\033[0m", "\033[2m"})
    for (size_t at; (at = text.find(sgr)) != std::string::npos;)
      text.erase(at, std::string(sgr).size());
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x07') == std::string::npos);
  CHECK(text.find("\\x1B]0;pwned\\x07") != std::string::npos);
}

TEST_CASE("markdown: names from the image stay text, one Mermaid chain per loader finding") {
  report::Report r = Fixed();
  r.findings[0].message = "</summary><script>x</script> | `tick` **bold** [link](javascript:)";
  r.findings[0].paths[0] = "/opt/```mermaid\"]/libcudnn.so.5.0.5";
  std::string md = report::Render(r, report::Format::kMarkdown);
  CHECK(md.find("<script>") == std::string::npos);
  CHECK(md.find("</summary><script>") == std::string::npos);
  CHECK(md.find("**bold**") == std::string::npos);
  CHECK(md.find("&#60;script&#62;") != std::string::npos);
  // The fences are ours alone: one ```mermaid block, for IC001 (the only loader finding).
  size_t fences = 0;
  for (size_t at = md.find("```"); at != std::string::npos; at = md.find("```", at + 1)) ++fences;
  CHECK(fences == 2);
  CHECK(md.find("```mermaid\nflowchart LR\n") != std::string::npos);
  // One section per severity, in order; the verdict and the counts' table first.
  size_t errors = md.find("### Errors (1)"), warnings = md.find("### Warnings (1)");
  size_t info = md.find("### Info (1)");
  CHECK(errors < warnings);
  CHECK(warnings < info);
  CHECK(info != std::string::npos);
  CHECK(md.find("**FAIL (exit 1: 1 finding at or above --fail-on error)**") < errors);
  CHECK(md.find("|---:|") < errors);
  // In the baseline: a section of their own.
  r.baseline = true;
  r.findings[0].baseline = true;
  std::string known = report::Render(r, report::Format::kMarkdown);
  CHECK(known.find("### In the baseline (1)") != std::string::npos);
  CHECK(known.find("\n### Errors (1)") == std::string::npos);
  size_t nested = known.find("\n#### Errors (1)");
  CHECK(nested != std::string::npos);
  CHECK(nested > known.find("### In the baseline (1)"));
}

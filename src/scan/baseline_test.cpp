#include "scan/baseline.h"

#include <catch2/catch.hpp>

#include "util/error.h"

namespace imgcheck::scan {

TEST_CASE("baseline: the fingerprints of a report's findings, bad reports refused in one line") {
  Baseline b = ParseBaseline(
      R"({"schema":"imgcheck-report/1","findings":[{"rule":"IC001","fingerprint":"ab"},
          {"rule":"IC012","fingerprint":"cd#2"}],"suppressed":[{"fingerprint":"ef"}]})",
      "main.json");
  CHECK(b.fingerprints == std::set<std::string>{"ab", "cd#2"});
  std::vector<rules::Finding> findings(3);
  findings[0].fingerprint = "ab";
  findings[1].fingerprint = "ef";  // suppressed there, not a finding of the baseline
  findings[2].fingerprint = "cd";
  MarkBaseline(b.fingerprints, findings);
  CHECK(findings[0].baseline);
  CHECK_FALSE(findings[1].baseline);
  CHECK_FALSE(findings[2].baseline);

  auto refused = [](std::string_view text) {
    try {
      ParseBaseline(text, "main.json");
    } catch (const util::Fatal& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refused("{") == "--baseline: main.json: not JSON");
  CHECK(refused(R"({"findings":[]})") ==
        "--baseline: main.json: not an imgcheck JSON report (scan --format json)");
  CHECK(refused(R"({"schema":"imgcheck-report/1","findings":[{"rule":"IC001"}]})")
            .find("a finding without a fingerprint") != std::string::npos);
  CHECK(refused(std::string(100, '[') + std::string(100, ']')) ==
        "--baseline: main.json: nests deeper than 64");
  std::string wide = "[" + std::string(kMaxBaselineValues + 1, ',') + "]";
  CHECK(refused(wide) == "--baseline: main.json: holds more than 4194304 values");
  CHECK(refused(R"({"schema":"imgcheck-report/1","findings":[]})") == "accepted");
}

TEST_CASE("baseline: a missing file is one line naming it") {
  try {
    LoadBaseline("/nonexistent/imgcheck-baseline.json");
    FAIL("no error");
  } catch (const util::Fatal& e) {
    std::string m = e.what();
    CHECK(m.find("--baseline: cannot read /nonexistent/imgcheck-baseline.json") == 0);
    CHECK(m.find('\n') == std::string::npos);
  }
}

}  // namespace imgcheck::scan

#include "rules/config.h"

#include <catch2/catch.hpp>

using namespace imgcheck::rules;

namespace {

const Knowledge& BuiltinRules() {
  static const Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR});
  return k;
}

Finding Make(std::string rule, Severity s, std::vector<std::string> paths) {
  Finding f;
  f.rule = std::move(rule);
  f.severity = s;
  f.paths = std::move(paths);
  return f;
}

}  // namespace

TEST_CASE("the YAML subset: severity overrides, ignores with reasons and paths, fail-on") {
  auto c = ParseConfig(".imgcheck.yaml",
                       "# CI policy\n"
                       "fail-on: warning\n"
                       "severity:\n"
                       "  IC051: warning   # we care\n"
                       "  shadowed-library: error\n"
                       "ignore:\n"
                       "  - rule: IC060\n"
                       "    reason: \"the entrypoint cds first\"\n"
                       "  - rule: IC011\n"
                       "    path: /opt/legacy/**\n"
                       "    reason: kept for the old model server\n",
                       BuiltinRules());
  REQUIRE(c);
  CHECK(c->fail_on == FailOn{Severity::kWarning});
  CHECK(c->severity.at("IC051") == Severity::kWarning);
  CHECK(c->severity.at("IC010") == Severity::kError);
  REQUIRE(c->ignores.size() == 2);
  CHECK(c->ignores[0].reason == "the entrypoint cds first");
  CHECK(c->ignores[0].where == ".imgcheck.yaml:7");
  CHECK(c->ignores[1].path == "/opt/legacy/**");

  std::vector<Finding> findings = {
      Make("IC051", Severity::kInfo, {"/usr/lib/libcublas.so.12"}),
      Make("IC060", Severity::kWarning, {}),
      Make("IC011", Severity::kWarning, {"/opt/legacy/lib/libcudnn.so.8"}),
      Make("IC011", Severity::kWarning, {"/usr/lib/libcudnn.so.8"})};
  auto removed = ApplyConfig(*c, findings);
  REQUIRE(findings.size() == 2);
  CHECK(findings[0].severity == Severity::kWarning);        // IC051 raised
  CHECK(findings[1].paths[0] == "/usr/lib/libcudnn.so.8");  // outside the ignored path
  REQUIRE(removed.size() == 2);
  CHECK(removed[1].ignore.reason == "kept for the old model server");
}

TEST_CASE("the same config as JSON") {
  auto c = ParseConfig(
      "policy.json",
      "{\"ignore\": [{\"rule\": \"IC051\", \"reason\": \"vendored\"}], \"fail-on\": \"none\"}",
      BuiltinRules());
  REQUIRE(c);
  CHECK(c->fail_on == FailOn{});
  CHECK(c->ignores.at(0).rule == "IC051");
}

TEST_CASE("config errors name the line, and mistyped rules get a suggestion") {
  auto no_reason = ParseConfig("c.yaml", "ignore:\n  - rule: IC051\n", BuiltinRules());
  REQUIRE_FALSE(no_reason);
  CHECK(no_reason.error().message == "c.yaml:2: the ignore of IC051 needs a \"reason\"");
  auto typo = ParseConfig("c.yaml", "severity:\n  IC0051: error\n", BuiltinRules());
  REQUIRE_FALSE(typo);
  CHECK(typo.error().message ==
        "c.yaml:2: unknown rule \"IC0051\"; did you mean IC051 (unmanaged-library)?");
  auto bad_json = ParseConfig("c.json", "{\n\"ignore\": [\n}", BuiltinRules());
  REQUIRE_FALSE(bad_json);
  CHECK(bad_json.error().message.rfind("c.json:3: ", 0) == 0);
  auto bad_key = ParseConfig("c.yaml", "fail_on: error\n", BuiltinRules());
  REQUIRE_FALSE(bad_key);
  CHECK(bad_key.error().message.rfind("c.yaml:1: unknown key", 0) == 0);
}

TEST_CASE("fail-on gates") {
  CHECK_FALSE(Fails(*ParseFailOn("none"), Severity::kError));
  CHECK(Fails(*ParseFailOn("info"), Severity::kInfo));
  CHECK_FALSE(Fails(*ParseFailOn("error"), Severity::kWarning));
  CHECK(Fails(*ParseFailOn("warning"), Severity::kError));
  CHECK_FALSE(ParseFailOn("fatal"));
}

TEST_CASE("path globs for ignores") {
  CHECK(PathGlobMatch("/opt/**", "/opt/a/b/libx.so"));
  CHECK(PathGlobMatch("**/libcudnn*", "/usr/lib/x86_64-linux-gnu/libcudnn.so.8"));
  CHECK(PathGlobMatch("/usr/lib/*.so.8", "/usr/lib/libcudnn.so.8"));
  CHECK_FALSE(PathGlobMatch("/usr/lib/*.so.8", "/usr/lib/sub/libcudnn.so.8"));
  CHECK_FALSE(PathGlobMatch("/opt/**", "/usr/opt/x"));
}

TEST_CASE("config: full YAML (flow collections, block scalars, comments)") {
  auto flow = ParseConfig("c.yaml", "ignore: [{rule: IC051, reason: x}]\nfail-on: warning\n",
                          BuiltinRules());
  REQUIRE(flow);
  CHECK(flow->ignores.at(0).rule == "IC051");
  CHECK(flow->ignores.at(0).reason == "x");
  auto folded =
      ParseConfig("c.yaml",
                  "# team policy\nignore:\n  - rule: IC051\n    reason: >-\n      vendored\n"
                  "      on purpose\n    path: \"/opt/**\"\n",
                  BuiltinRules());
  REQUIRE(folded);
  CHECK(folded->ignores.at(0).reason == "vendored on purpose");
  CHECK(folded->ignores.at(0).path == "/opt/**");
  auto broken = ParseConfig("c.yaml", "ignore:\n  - rule: IC051\n   reason: [\n", BuiltinRules());
  REQUIRE_FALSE(broken);
  CHECK(broken.error().message.rfind("c.yaml:", 0) == 0);
  auto twice = ParseConfig("c.yaml", "fail-on: error\nfail-on: none\n", BuiltinRules());
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message == "c.yaml:2: \"fail-on\" appears twice");
}

TEST_CASE("config: an ignore past its expires date is reported and no longer applies") {
  const std::string text =
      "ignore:\n"
      "  - rule: IC051\n    reason: vendored until the wheel lands\n    expires: 2026-01-31\n"
      "  - rule: IC060\n    reason: entrypoint cds\n    expires: 2026-12-31\n";
  auto before = ParseConfig("c.yaml", text, BuiltinRules(), "2026-01-31");  // the last day it holds
  REQUIRE(before);
  CHECK(before->ignores.size() == 2);
  CHECK(before->expired.empty());
  auto after = ParseConfig("c.yaml", text, BuiltinRules(), "2026-02-01");
  REQUIRE(after);
  REQUIRE(after->ignores.size() == 1);
  CHECK(after->ignores[0].rule == "IC060");
  REQUIRE(after->expired.size() == 1);
  CHECK(after->expired[0] ==
        "c.yaml:2: the ignore of IC051 expired on 2026-01-31 and no longer applies (vendored "
        "until the wheel lands)");
  std::vector<Finding> findings(1);
  findings[0].rule = "IC051";
  CHECK(ApplyConfig(*after, findings).empty());  // reported again
  CHECK(findings.size() == 1);
  auto bad = ParseConfig("c.yaml", "ignore:\n  - {rule: IC051, reason: x, expires: 31/01/2026}\n",
                         BuiltinRules());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("expires must be a date, YYYY-MM-DD") != std::string::npos);
}

#include "rules/config.h"

#include <catch2/catch.hpp>

using namespace imgcheck::rules;

namespace {

const Knowledge& Builtin() {
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
                       Builtin());
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
      Builtin());
  REQUIRE(c);
  CHECK(c->fail_on == FailOn{});
  CHECK(c->ignores.at(0).rule == "IC051");
}

TEST_CASE("config errors name the line, and mistyped rules get a suggestion") {
  auto no_reason = ParseConfig("c.yaml", "ignore:\n  - rule: IC051\n", Builtin());
  REQUIRE_FALSE(no_reason);
  CHECK(no_reason.error().message == "c.yaml:2: the ignore of IC051 needs a \"reason\"");
  auto typo = ParseConfig("c.yaml", "severity:\n  IC0051: error\n", Builtin());
  REQUIRE_FALSE(typo);
  CHECK(typo.error().message ==
        "c.yaml:2: unknown rule \"IC0051\"; did you mean IC051 (unmanaged-library)?");
  auto bad_json = ParseConfig("c.json", "{\n\"ignore\": [\n}", Builtin());
  REQUIRE_FALSE(bad_json);
  CHECK(bad_json.error().message.rfind("c.json:3: ", 0) == 0);
  auto bad_key = ParseConfig("c.yaml", "fail_on: error\n", Builtin());
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

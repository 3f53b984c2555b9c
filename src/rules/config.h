// The user's configuration (.imgcheck.yaml / .imgcheck.json): severity overrides, ignored rules
// and path-scoped ignores, each ignore with a reason. Applied to findings after the checks.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rules/finding.h"
#include "rules/knowledge.h"
#include "util/error.h"

namespace imgcheck::rules {

struct Ignore {
  std::string rule;    ///< rule ID ("IC051")
  std::string path;    ///< glob on image paths ('*' within a component, '**' any depth); "" = all
  std::string reason;  ///< why; required
  std::string where;   ///< "file:line" or "--ignore"
  std::string expires{};  ///< "YYYY-MM-DD": applies through that day (UTC); "" for ever
};

/// The CI gate: the lowest severity that fails the run, or never ("none": `at` empty).
struct FailOn {
  std::optional<Severity> at;
  operator std::optional<Severity>() const { return at; }  // NOLINT(google-explicit-constructor)
  bool operator==(const FailOn&) const = default;
};
/// "none", "info", "warning", "error"; nullopt for anything else.
std::optional<FailOn> ParseFailOn(std::string_view text);
/// True when a finding of `severity` fails the run under `gate`.
bool Fails(FailOn gate, Severity severity);

struct Config {
  std::string path;                          ///< file read, "" when none
  std::map<std::string, Severity> severity;  ///< rule ID -> severity
  std::vector<Ignore> ignores;
  std::optional<FailOn> fail_on;  ///< set by the file's `fail-on`
  /// Ignores past their `expires` date, which no longer apply: "file:line: the ignore of IC051
  /// expired on 2026-01-31 (reason)", for the report's notes.
  std::vector<std::string> expired;
};

/// Parses a config file: JSON when `path` ends in .json, else the YAML subset of rules/README.md.
/// Rule IDs are checked against `knowledge` (with a "did you mean"). Error: "path:line: message".
/// An ignore whose `expires` date is before `today` ("YYYY-MM-DD"; empty: the current UTC date)
/// goes to Config::expired instead of Config::ignores.
util::Expected<Config> ParseConfig(const std::string& path, std::string_view text,
                                   const Knowledge& knowledge, std::string_view today = {});
/// The config file in `dir`: .imgcheck.yaml, .imgcheck.yml or .imgcheck.json; "" when none.
std::string FindConfig(const std::string& dir);

/// True when `glob` matches image path `path` ('*' stays in a component, '**' spans any).
bool PathGlobMatch(std::string_view glob, std::string_view path);

/// A finding an ignore removed, and the ignore.
struct Suppressed {
  Finding finding;
  Ignore ignore;
};

/// Applies severity overrides, then ignores, to `findings` (in place); returns what was removed.
std::vector<Suppressed> ApplyConfig(const Config& config, std::vector<Finding>& findings);

}  // namespace imgcheck::rules

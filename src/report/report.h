// Reports: findings rendered as text (people), JSON (tools), SARIF 2.1.0 (code scanning), JUnit
// XML (CI test views) and GitLab Code Quality. Formats only read the model; they never decide.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rules/config.h"
#include "rules/finding.h"
#include "rules/knowledge.h"
#include "rules/target.h"
#include "util/error.h"
#include "util/formats.h"

namespace imgcheck::report {

enum class Format : uint8_t { kText, kJson, kSarif, kJunit, kCodeQuality, kMarkdown };

/// The one table of scan output formats (--format, its help, check and completion).
inline constexpr std::array<util::FormatInfo<Format>, 6> kFormats = {{
    {Format::kText, "text", "grouped by severity, for people, in colour on a terminal"},
    {Format::kJson, "json", "imgcheck-report/1 JSON: image, findings, suppressed, notes"},
    {Format::kSarif, "sarif", "SARIF 2.1.0, for code-scanning uploads"},
    {Format::kJunit, "junit", "JUnit XML, one test case per rule"},
    {Format::kCodeQuality, "codequality", "GitLab Code Quality JSON, for merge requests"},
    {Format::kMarkdown, "markdown",
     "GitHub-flavoured Markdown, for job summaries and pull-request comments"},
}};

struct ImageInfo {
  std::string reference;
  std::string transport;
  std::string manifest_digest;
  std::string config_digest;
  std::string platform;
};

struct Report {
  ImageInfo image;
  std::vector<rules::Finding> findings;         ///< as rules::SortFindings orders them
  std::vector<rules::Suppressed> suppressed;    ///< removed by the config or --ignore
  std::vector<std::string> notes;               ///< what the scan could not check, and why
  std::vector<util::Diagnostic> diagnostics;    ///< corrupt files met in the image
  bool cuda_stack = true;                       ///< false: nothing to check (no CUDA at all)
  const rules::Knowledge* knowledge = nullptr;  ///< the rule table (SARIF rules, JUnit cases)
  std::string tool_version;
  std::string rules_version;  ///< rules::DataVersion::str() of the data the findings used
  /// SARIF automationDetails category: one per image repository, not per build, so code
  /// scanning closes alerts a new build fixed ("" : the image reference).
  std::string sarif_category;
  rules::FailOn fail_on{rules::Severity::kError};  ///< the gate: JUnit fails only what fails it
  std::vector<rules::NotRun> not_run;              ///< rules that could not run (JUnit skipped)
  bool dockerfile = false;  ///< --dockerfile was given: findings carry Dockerfile lines
  std::string timestamp;    ///< when the scan ran, UTC "YYYY-MM-DDTHH:MM:SS"; "" when unknown
  /// Compared against a baseline (scan --baseline, diff): findings say whether it had them.
  bool baseline = false;
};

/// True when `f` fails the report's gate: at or above --fail-on and not in the baseline. The
/// exit code, the verdict and JUnit's failures all ask this.
bool Fails(const Report& report, const rules::Finding& f);

struct RenderOptions {
  bool color = false;    ///< ANSI colours (text only; the caller decides: a TTY and no NO_COLOR)
  bool verbose = false;  ///< text: evidence, every path and quiet findings (scan --verbose)
};

/// True when the text report shows `f` (quiet findings only with --verbose).
bool Shown(const rules::Finding& f, const RenderOptions& options);
/// The exit code's verdict in words: "PASS (exit 0, --fail-on error)" or
/// "FAIL (exit 1: 2 findings at or above --fail-on error)".
std::string Verdict(const Report& report);

std::string Render(const Report& report, Format format, const RenderOptions& options = {});

/// A resolution as evidence shows it: "REAL_PATH (REASON ENTRY)" when found (the entry left out
/// when empty or the path itself), else rules::UnresolvedText.
std::string ResolutionText(const loader::Resolution& r);
/// How `r` resolved, without the path: "REASON ENTRY" ("runpath $ORIGIN/../lib"; the entry left
/// out as ResolutionText leaves it out), else rules::UnresolvedText.
std::string ResolutionReason(const loader::Resolution& r);
/// The value of one step of evidence, rendered from its resolution when it has one.
std::string EvidenceValue(const rules::Evidence& e);

std::string RenderText(const Report& report, const RenderOptions& options);
std::string RenderJson(const Report& report);
std::string RenderSarif(const Report& report);
std::string RenderJunit(const Report& report);
std::string RenderCodeQuality(const Report& report);
std::string RenderMarkdown(const Report& report);

}  // namespace imgcheck::report

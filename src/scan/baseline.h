// Baselines: the findings of an earlier scan (its JSON report, e.g. of main's image), which a
// new scan reports as such and leaves out of its exit code, so that a gate fails only for what
// a change introduced. Findings are matched by fingerprint (scan/fingerprint.h).
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "rules/finding.h"

namespace imgcheck::scan {

/// Bounds of a baseline report: it is a file from elsewhere (a CI artifact), read whole.
inline constexpr size_t kMaxBaselineBytes = size_t{64} << 20;
inline constexpr size_t kMaxBaselineDepth = 64;
inline constexpr size_t kMaxBaselineValues = size_t{1} << 22;

struct Baseline {
  std::string path;                    ///< where it was read from
  std::set<std::string> fingerprints;  ///< of its findings (not of its suppressed ones)
};

/// The baseline in the imgcheck-report/1 JSON report at `path`. util::Fatal, one line naming
/// the file, when it cannot be read, is too big, too deep or holds too many values (the parser's
/// memory), is no imgcheck JSON report, or
/// its findings carry no fingerprint (a report of an imgcheck before fingerprints).
Baseline LoadBaseline(const std::string& path);
/// Parses the report's text (LoadBaseline's work, without the file); `path` names it in errors.
Baseline ParseBaseline(std::string_view text, const std::string& path);

/// Marks each finding whose fingerprint the baseline holds (`baseline = true`).
void MarkBaseline(const std::set<std::string>& fingerprints, std::vector<rules::Finding>& findings);

}  // namespace imgcheck::scan

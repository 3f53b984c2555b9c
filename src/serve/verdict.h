// A verdict: what imgcheck concluded about one image manifest under one policy, kept as the
// scan's own JSON report (schema imgcheck-report/1) plus the parts an answer needs, parsed once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/report.h"
#include "rules/config.h"
#include "rules/finding.h"
#include "util/error.h"

namespace imgcheck::serve {

struct VerdictFinding {
  std::string rule, name;
  rules::Severity severity = rules::Severity::kError;
  std::string message;
  std::string path;  ///< the finding's main path in the image, "" when none
  std::string remediation;
};

struct Verdict {
  std::string digest;     ///< the image manifest's digest
  std::string reference;  ///< what was scanned
  std::vector<VerdictFinding> findings;
  std::string report;  ///< the imgcheck-report/1 JSON, as stored and shared
  /// How it was reached: "scan" (default), "attestation" (a signed statement, --trust-key).
  std::string source = "scan";
  /// True when a finding is at or above `gate` (the `--fail-on` of scan).
  bool Fails(rules::FailOn gate) const;
};

/// The verdict of a scan's report, typed, with its imgcheck-report/1 JSON for the shared store.
Verdict VerdictOf(const report::Report& report);
/// Reads an imgcheck-report/1 document (from the shared store); the error names what is missing.
util::Expected<Verdict> ParseVerdict(std::string_view report);

/// "IC001 cudnn-version-mismatch in /opt/x/libcudnn.so.5: fix: ..." (one line, for messages).
std::string FindingLine(const VerdictFinding& f);

}  // namespace imgcheck::serve

// `imgcheck diff OLD NEW`: two scans through the one front door and what changed between them.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "report/diff.h"
#include "scan/scan.h"

namespace imgcheck::scan {

struct DiffResult {
  std::unique_ptr<Result> old_scan, new_scan;
  std::set<std::string> old_fingerprints;  ///< the new scan's baseline
  report::Diff diff;
};

/// Scans `old_request`, then `new_request` with the old findings as its baseline. Both read
/// through the same layer cache (their load options' cache), so layers the images share are
/// read once, by the first scan. Throws util::Fatal as Run does.
std::unique_ptr<DiffResult> RunDiff(const Request& old_request, Request new_request);

/// What changed from `old_scan` to `new_scan` (both at depth kFindings, the new one marked
/// against the old one's fingerprints).
report::Diff Compare(const Result& old_scan, const Result& new_scan);

}  // namespace imgcheck::scan

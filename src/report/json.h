// The JSON shape of one finding, shared by the scan report (imgcheck-report/1) and the diff
// (imgcheck-diff/1).
#pragma once

#include <nlohmann/json.hpp>

#include "rules/finding.h"

namespace imgcheck::report {

/// rule, name, severity, message, paths, fingerprint, baseline, layer, remediation, evidence,
/// and with `dockerfile` the Dockerfile line (null when unmapped) and written_by.
nlohmann::ordered_json FindingJson(const rules::Finding& f, bool dockerfile);

}  // namespace imgcheck::report

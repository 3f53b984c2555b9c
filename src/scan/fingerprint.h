// The one fingerprint of a finding: what a baseline, a diff of two images and SARIF's
// partialFingerprints ("imgcheck/v2") match findings by, from one scan to the next.
#pragma once

#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "rules/finding.h"

namespace imgcheck::scan {

/// The fingerprint's key before hashing: the rule; the package that owns the main path (name
/// only, no version); the library base name of the main path's file and of the first name the
/// loader was asked for ("libcudnn.so.8.9.2" and "libcudnn.so.9" both "libcudnn"; a file that is
/// no library keeps its name with every run of digits as "N"); the configuration variable.
/// Nothing that moves between layers or directories, and no version a bump changes.
std::string FingerprintKey(const rules::Finding& f, const catalog::Catalog& catalog);

/// Sets every finding's `fingerprint` (hex SHA-256 of FingerprintKey). Findings whose keys
/// collide get "#2", "#3" appended in the order given (rules::SortFindings' order), so none
/// merge and the numbering is the same from scan to scan.
void AssignFingerprints(std::vector<rules::Finding>& findings, const catalog::Catalog& catalog);

}  // namespace imgcheck::scan

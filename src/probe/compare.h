// What the probe saw against what the static scan predicted: findings under the probe rules
// (rules/probe.json, IC070-IC078).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"
#include "probe/probe.h"
#include "rules/finding.h"
#include "rules/knowledge.h"

namespace imgcheck::probe {

/// A planned library as handed to the probe: the file materialised for it.
struct StagedLibrary {
  PlannedLibrary planned;
  std::string local_path;  ///< absolute, inside the private directory (the soname link)
};

/// Findings from `observation` of `staged` (materialised under `private_dir`). Nothing for a
/// skipped probe (no GPU). `layers` gives each finding its layer digest and history line.
std::vector<rules::Finding> Compare(const std::vector<StagedLibrary>& staged,
                                    std::string_view private_dir, const Observation& observation,
                                    const rules::Knowledge& knowledge,
                                    const std::vector<image::Layer>& layers);

}  // namespace imgcheck::probe

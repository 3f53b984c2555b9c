// The checks over the catalog and the link maps, what they read (ScanInput), and the rule data
// that decides which objects the loader stage loads (ConsumerRulesOf).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "image/image.h"
#include "loader/loader.h"
#include "loader/session.h"
#include "rules/finding.h"
#include "rules/knowledge.h"
#include "rules/version.h"

namespace imgcheck::rules {

/// The machine the image is meant to run on. Rules that need it stay silent without it.
struct Target {
  std::optional<Version> driver;   ///< kernel driver version ("535.104.05")
  std::string driver_from;         ///< "--driver", "/proc/driver/nvidia/version", ...
  std::optional<int> sm;           ///< GPU compute capability x10
  std::string gpu_from;            ///< "--gpu A100", "nvidia-smi: NVIDIA A100-SXM4-80GB"
  std::vector<std::string> notes;  ///< why a part of the target is missing, for the report
};

using Consumer = loader::Consumer;

/// Everything the checks read.
struct ScanInput {
  const image::Image* image = nullptr;
  const catalog::Catalog* catalog = nullptr;
  const Knowledge* knowledge = nullptr;
  Target target;
  /// The link map of every consumer (none when the loader does not model the image).
  loader::Session session;
};

/// What decides the consumers and how each loads (loader::Session::Build), from `knowledge`:
/// the library families, the preload and optional tables, and the dlopen rules, a name with
/// "{cudnn_major}" taking the major of the cuDNN a framework was built with. `knowledge` must
/// outlive the result.
loader::ConsumerRules ConsumerRulesOf(const Knowledge& knowledge);

/// Runs every check, in rule ID order; the findings in the order the checks made them (the
/// caller sorts once, with whatever else joins them: scan::Run).
std::vector<Finding> RunChecks(const ScanInput& input);
/// The order of every report: by severity (errors first), then rule, then path (stable).
void SortFindings(std::vector<Finding>& findings);

/// IDs of the rules that have a check, sorted (each must be in the catalogue).
std::vector<std::string> ImplementedRules();

}  // namespace imgcheck::rules

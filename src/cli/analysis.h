// The static analysis that `scan` and `probe` share: rule data, image, catalog, link maps.
#pragma once

#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "cli/commands.h"
#include "image/image.h"
#include "rules/knowledge.h"
#include "rules/scan.h"

namespace imgcheck::cli {

/// The built-in rule data with the `--rules` directories over it.
rules::Knowledge LoadKnowledge(const std::vector<std::string>& rules_dirs);

/// Reads the image, builds its catalog (classified with the last libraries.json among the rule
/// directories) and every consumer's link map into `input`. `input.knowledge` and its target
/// are the caller's; `input` points into `image` and `catalog`, which must outlive it.
void Analyze(const ImageArgs& args, const std::vector<std::string>& rules_dirs,
             image::Image& image, catalog::Catalog& catalog, rules::ScanInput& input);

}  // namespace imgcheck::cli

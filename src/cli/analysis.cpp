#include "cli/analysis.h"

#include <filesystem>

namespace imgcheck::cli {

rules::Knowledge LoadKnowledge(const std::vector<std::string>& rules_dirs) {
  std::vector<std::string> dirs = {RulesDir()};
  dirs.insert(dirs.end(), rules_dirs.begin(), rules_dirs.end());
  return rules::Knowledge::Load(dirs);
}

void Analyze(const ImageArgs& args, const std::vector<std::string>& rules_dirs,
             image::Image& image, catalog::Catalog& catalog, rules::ScanInput& input) {
  image = image::Load(args.reference, ToLoadOptions(args));
  std::string library_dir = RulesDir();
  for (const auto& d : rules_dirs)
    if (std::filesystem::exists(std::filesystem::path(d) / "libraries.json")) library_dir = d;
  catalog = catalog::Build(image, library_dir);
  input.image = &image;
  input.catalog = &catalog;
  input.options = rules::LoaderOptions(image, catalog, rules::DlopenRules(input.knowledge->files()));
  input.consumers = rules::LoadConsumers(image, catalog, input.options);
}

}  // namespace imgcheck::cli

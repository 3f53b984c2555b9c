#include "cli/analysis.h"

#include <filesystem>

namespace imgcheck::cli {

rules::Knowledge LoadKnowledge(const std::vector<std::string>& rules_dirs) {
  std::vector<std::string> dirs = {RulesDir()};
  dirs.insert(dirs.end(), rules_dirs.begin(), rules_dirs.end());
  return rules::Knowledge::Load(dirs);
}

void Analyze(const ImageArgs& args, const std::vector<std::string>& rules_dirs, image::Image& image,
             catalog::Catalog& catalog, rules::ScanInput& input) {
  image = image::Load(args.reference, ToLoadOptions(args));
  std::string library_dir = RulesDir();
  for (const auto& d : rules_dirs)
    if (std::filesystem::exists(std::filesystem::path(d) / "libraries.json")) library_dir = d;
  catalog = catalog::Build(image, library_dir);
  input.image = &image;
  input.catalog = &catalog;
  input.options =
      rules::LoaderOptions(image, catalog, rules::DlopenRules(input.knowledge->files()));
  input.consumers = rules::LoadConsumers(image, catalog, input.options);
}

void AddProbeRunArgs(CLI::App& sub, ProbeRunArgs& args, const std::string& timeout_flag) {
  sub.add_option(timeout_flag, args.timeout, "seconds before the probe process is killed")
      ->capture_default_str()
      ->check(CLI::Range(1, probe::kMaxProbeSeconds));
  // For tests only: a fake driver library stands in for the host's libcuda.so.1.
  sub.add_option("--test-libcuda", args.libcuda)->group("");
}

probe::RunOptions ToRunOptions(const ProbeRunArgs& args) {
  probe::RunOptions run;
  run.executable = probe::ProbeExecutable();
  run.libcuda = args.libcuda;
  run.wall_seconds = args.timeout;
  run.cpu_seconds = args.timeout;
  return run;
}

}  // namespace imgcheck::cli

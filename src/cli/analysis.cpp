#include "cli/analysis.h"

namespace imgcheck::cli {

void Analyze(const ImageArgs& args, image::Image& image, catalog::Catalog& catalog,
             rules::ScanInput& input) {
  const rules::Knowledge& k = *input.knowledge;
  image = image::Load(args.reference, ToLoadOptions(args, k.libraries()));
  catalog = catalog::Build(image, k.libraries());
  input.image = &image;
  input.catalog = &catalog;
  util::Expected<loader::Options> options = rules::LoaderOptions(image, catalog, k.dlopen());
  if (!options) {
    input.target.notes.push_back(options.error().message);  // the loader's rules stay silent
    return;
  }
  input.options = std::move(*options);
  input.consumers = rules::LoadConsumers(image, catalog, k, input.options);
}

void AddProbeRunArgs(CLI::App& sub, ProbeRunArgs& args, const std::string& timeout_flag) {
  sub.add_option(timeout_flag, args.timeout, "seconds before the probe process is killed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
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

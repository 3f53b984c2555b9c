// `imgcheck layers IMAGE`: each layer's digest, sizes, history line and what it changed.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "report/layers.h"
#include "scan/scan.h"

namespace imgcheck::cli {
namespace {

struct LayersArgs {
  ImageArgs image;
  std::string format = "text";
};

}  // namespace

Runner DefineLayers(CLI::App& sub) {
  auto args = std::make_shared<LayersArgs>();
  AddImageArgs(sub, args->image);
  std::vector<std::string> names;
  std::string help = "output format:";
  for (const report::LayersFormatInfo& f : report::LayersFormats()) {
    names.emplace_back(f.name);
    help += " " + std::string(f.name) + " (" + std::string(f.summary) + ")";
  }
  sub.add_option("-f,--format", args->format, help)
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  return [args]() -> int {
    // Read with the catalog's capture policy, so that cached layers serve every subcommand.
    rules::Knowledge knowledge = scan::LoadKnowledge({});
    auto scanned = scan::Run(ScanRequest(args->image, knowledge, scan::Depth::kImage));
    for (const report::LayersFormatInfo& f : report::LayersFormats())
      if (f.name == args->format) std::cout << f.render(scanned->image) << std::flush;
    return 0;
  };
}

}  // namespace imgcheck::cli

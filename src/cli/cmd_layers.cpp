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
  AddFormatOption(sub, args->format, report::kLayersFormats);
  return [args]() -> int {
    // Read with the catalog's capture policy, so that cached layers serve every subcommand.
    rules::Knowledge knowledge = scan::LoadKnowledge({});
    auto scanned = scan::Run(ScanRequest(args->image, knowledge, scan::Depth::kImage));
    std::cout << report::RenderLayers(scanned->image,
                                      FormatOf(report::kLayersFormats, args->format))
              << std::flush;
    return 0;
  };
}

}  // namespace imgcheck::cli

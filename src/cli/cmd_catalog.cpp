#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "report/catalog_report.h"
#include "report/image_header.h"
#include "scan/build_info.h"
#include "scan/scan.h"
#include "util/error.h"

namespace imgcheck::cli {
namespace {

struct CatalogArgs {
  ImageArgs image;
  std::string format = "table";
  std::string output;
  std::string sbom_scope = "cuda";
  std::vector<std::string> rules_dirs;
};

int RunCatalog(const CatalogArgs& args) {
  report::CatalogFormat format = FormatOf(report::kCatalogFormats, args.format);
  rules::Knowledge knowledge = scan::LoadKnowledge(args.rules_dirs);
  // An SBOM names the libraries' hashes and who loads whom: its reading hashes the libraries
  // (only then, see issue #26's CPU budget) and goes on to the link maps.
  bool sbom = report::IsSbom(format);
  scan::Request request =
      ScanRequest(args.image, knowledge, sbom ? scan::Depth::kLinkMaps : scan::Depth::kCatalog);
  request.sbom_hashes = sbom;
  std::unique_ptr<scan::Result> scanned = scan::Run(request);
  report::SbomInput sbom_input;
  sbom_input.all_packages = args.sbom_scope == "all";
  if (sbom) sbom_input.loads = scan::Loads(*scanned);
  const image::Image& img = scanned->image;
  scanned->catalog.diagnostics = scan::Diagnostics(*scanned);
  report::ImageInfo info = report::ImageInfoOf(img, args.image.platform);
  std::string text = report::RenderCatalog(scanned->catalog, info, format, scan::BuildVersion(),
                                           knowledge.version().str(), sbom_input);
  if (args.output.empty()) {
    std::cout << text << std::flush;
    return 0;
  }
  std::ofstream out(args.output, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw util::Fatal("--output: cannot write " + args.output);
  return 0;
}

}  // namespace

Runner DefineCatalog(CLI::App& sub) {
  auto args = std::make_shared<CatalogArgs>();
  AddImageArgs(sub, args->image);
  AddFormatOption(sub, args->format, report::kCatalogFormats);
  sub.add_option("-o,--output", args->output, "write to FILE instead of stdout");
  sub.add_option("--sbom-scope", args->sbom_scope,
                 "what an SBOM lists: cuda (the CUDA stack, marked incomplete) or all (every "
                 "dpkg, pip and conda package of the image too, marked complete)")
      ->check(CLI::IsMember({"cuda", "all"}))
      ->capture_default_str();
  AddRulesArg(sub, args->rules_dirs);
  return [args]() -> int { return RunCatalog(*args); };
}

}  // namespace imgcheck::cli

// imgcheck why IMAGE SONAME|PATH: how the loader resolves one library for every consumer.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "report/why.h"
#include "scan/scan.h"

namespace imgcheck::cli {
namespace {

struct WhyArgs {
  ImageArgs image;
  std::string target;
  std::vector<std::string> consumers;
  std::optional<std::string> ld_library_path;
  std::vector<std::string> rules_dirs;
  std::string format = "text";
};

int RunWhy(const WhyArgs& args) {
  report::WhyFormat format = FormatOf(report::kWhyFormats, args.format);
  rules::Knowledge knowledge = scan::LoadKnowledge(args.rules_dirs);
  scan::Request request = ScanRequest(args.image, knowledge, scan::Depth::kLinkMaps);
  request.ld_library_path = args.ld_library_path;
  request.roots = args.consumers;
  request.loader_required = true;
  std::unique_ptr<scan::Result> scanned = scan::Run(request);
  const image::Image& img = scanned->image;
  std::vector<scan::WhyEntry> entries = scan::Why(*scanned, args.target);
  std::cout << report::RenderWhy(img, args.target, entries, format) << std::flush;
  bool all_found = !entries.empty();
  for (const scan::WhyEntry& e : entries) all_found &= e.resolution.found();
  return all_found ? 0 : 1;
}

}  // namespace

Runner DefineWhy(CLI::App& sub) {
  auto args = std::make_shared<WhyArgs>();
  AddImageArgs(sub, args->image);
  sub.add_option("target", args->target,
                 "a soname as consumers request it (libcudnn.so.9) or a path in the image")
      ->required();
  sub.add_option("--consumer", args->consumers,
                 "load only this object (a path in the image) instead of every framework "
                 "extension, CUDA library and CUDA executable");
  sub.add_option("--ld-library-path", args->ld_library_path,
                 "use this LD_LIBRARY_PATH instead of the image's Env");
  AddFormatOption(sub, args->format, report::kWhyFormats);
  AddRulesArg(sub, args->rules_dirs);
  sub.footer(
      "Exit status: 0 when every consumer finds it, 1 when one does not (or none requests it), "
      "2 when the image cannot be read.");
  return [args]() -> int { return RunWhy(*args); };
}

}  // namespace imgcheck::cli

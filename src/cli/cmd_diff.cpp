// `imgcheck diff OLD NEW`: what a change did to the CUDA stack (frameworks, libraries by
// package, loads that resolve differently) and which findings it introduced, fixed or kept.
// The exit code applies --fail-on to the new findings only: a pull request fails for what it
// introduces, not for what it inherited.
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/rule_args.h"
#include "report/diff.h"
#include "scan/diff.h"
#include "util/error.h"
#include "util/profile.h"

namespace imgcheck::cli {

namespace {

struct DiffArgs {
  ImageArgs image;  ///< OLD and every reading flag; NEW shares them
  std::string new_reference;
  std::string format = "text";
  std::string output;  ///< --output FILE; "" for stdout
  scan::PolicyArgs rules;
};

int Diff(const DiffArgs& args) {
  report::DiffFormat format = FormatOf(report::kDiffFormats, args.format);
  scan::Policy& policy = KeepToExit(std::make_unique<scan::Policy>(scan::LoadPolicy(args.rules)));
  scan::Request old_request = ScanRequest(args.image, policy.knowledge, scan::Depth::kFindings);
  old_request.policy = &policy;
  scan::Request new_request = old_request;
  new_request.reference = args.new_reference;
  // One layer cache for both: the layers the images share are read once, by the first scan.
  scan::DiffResult& d = KeepToExit(scan::RunDiff(old_request, new_request));
  std::string text;
  {
    util::ProfileSpan span(util::Stage::kReport);
    text = report::RenderDiff(d.diff, format);
  }
  if (args.output.empty()) {
    std::cout << text << std::flush;
  } else {
    std::ofstream out(args.output, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw util::Fatal("--output: cannot write " + args.output);
  }
  for (const rules::Finding& f : d.diff.report.findings)
    if (report::Fails(d.diff.report, f)) return 1;
  return 0;
}

}  // namespace

Runner DefineDiff(CLI::App& sub) {
  auto args = std::make_shared<DiffArgs>();
  AddImageArgs(sub, args->image);
  sub.add_option("new", args->new_reference,
                 "the image after the change, in any form the first one may take")
      ->required();
  AddFormatOption(sub, args->format, report::kDiffFormats);
  sub.add_option("-o,--output", args->output, "write the diff to FILE instead of stdout");
  AddRuleArgs(sub, args->rules);
  sub.footer(
      "Exit status: 0 when no new finding is at or above --fail-on (findings the old image "
      "had do not count), 1 when one is, 2 when an image cannot be read.");
  return [args]() -> int { return Diff(*args); };
}

}  // namespace imgcheck::cli

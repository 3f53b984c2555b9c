// `imgcheck probe IMAGE`: the static scan's loader resolutions, then the image's own cuDNN stack
// run on this host's GPU by imgcheck-probe (a separate process under limits), and the two
// compared. Opt-in: it runs code from the image. Exit: 0 agreed, 1 findings at or above
// --fail-on, 2 could not be done, 3 no NVIDIA driver or GPU (probe skipped).
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/rule_args.h"
#include "probe/session.h"
#include "report/escape.h"
#include "rules/config.h"
#include "scan/scan.h"
#include "util/error.h"

namespace imgcheck::cli {

namespace {

struct ProbeArgs {
  ImageArgs image;
  std::string format = "text";
  std::string fail_on = "error";
  std::vector<std::string> rules_dirs;
  ProbeRunArgs run;
};

int Probe(const ProbeArgs& args) {
  probe::ReportFormat format = FormatOf(probe::kReportFormats, args.format);
  auto fail_on = rules::ParseFailOn(args.fail_on);
  if (!fail_on)
    throw util::Fatal("--fail-on: '" + args.fail_on + "' is not none, info, warning or error");
  std::cerr << kProbeNotice;

  // The static scan's link maps: the probe checks their predictions.
  rules::Knowledge knowledge = scan::LoadKnowledge(args.rules_dirs);
  scan::Request request = ScanRequest(args.image, knowledge, scan::Depth::kLinkMaps);
  probe::ScanStep step(ToRunOptions(args.run));
  request.probe = &step;
  scan::Run(request);
  const probe::Session& session = step.session();
  std::string text = probe::Format(session, format);
  std::cout << (format == probe::ReportFormat::kJson ? text : report::VisibleLines(text))
            << std::flush;
  return probe::ExitCode(session, *fail_on);
}

}  // namespace

Runner DefineProbe(CLI::App& sub) {
  auto args = std::make_shared<ProbeArgs>();
  AddImageArgs(sub, args->image);
  AddFormatOption(sub, args->format, probe::kReportFormats);
  sub.add_option("--fail-on", args->fail_on,
                 "exit 1 when a probe finding is at or above: none|info|warning|error")
      ->capture_default_str();
  AddRulesArg(sub, args->rules_dirs);
  AddProbeRunArgs(sub, args->run, "--timeout");
  return [args]() -> int { return Probe(*args); };
}

}  // namespace imgcheck::cli

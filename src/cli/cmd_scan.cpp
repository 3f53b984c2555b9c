// `imgcheck scan IMAGE` (also plain `imgcheck IMAGE`): image -> catalog -> loader -> rules ->
// report, and the CI exit code: 0 nothing at or above --fail-on, 1 findings, 2 scan failed.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/analysis.h"
#include "cli/commands.h"
#include "probe/session.h"
#include "report/report.h"
#include "util/error.h"

namespace imgcheck::cli {

namespace {

struct ScanArgs {
  ImageArgs image;
  std::string format = "text";
  std::string output;
  RuleArgs rules;
  bool fail_on_empty = false;  ///< --fail-on-empty: exit 1 when there is no CUDA stack
  bool probe = false;          ///< --probe: also run the GPU probe (src/probe)
  ProbeRunArgs probe_run;
};

int Scan(const ScanArgs& args) {
  auto format = report::ParseFormat(args.format);
  if (!format)
    throw util::Fatal("--format: unknown format '" + args.format + "' (" + report::FormatNames() +
                      ")");
  Policy policy = LoadPolicy(args.rules);
  std::string probe_note;
  ExtraFindings probe_findings;
  if (args.probe)  // the GPU probe's findings join the scan's; without a GPU only a note
    probe_findings = [&](const rules::ScanInput& input, report::Report& rep) {
      std::cerr << kProbeNotice;
      probe::Session ps = probe::RunSession(args.image.reference,
                                            ToLoadOptions(args.image, policy.knowledge.libraries()),
                                            input, ToRunOptions(args.probe_run));
      if (ps.no_gpu) probe_note = "--probe: no GPU: probe skipped (" + ps.skip_reason + ")";
      if (ps.nothing_to_load) probe_note = "--probe: " + ps.skip_reason;
      rep.findings.insert(rep.findings.end(), ps.findings.begin(), ps.findings.end());
    };
  report::Report rep = ScanReport(args.image, policy, probe_findings);
  if (!probe_note.empty()) rep.notes.push_back(probe_note);

  report::RenderOptions ro;
  ro.color = args.output.empty() && *format == report::Format::kText && isatty(STDOUT_FILENO) &&
             std::getenv("NO_COLOR") == nullptr;
  std::string text = report::Render(rep, *format, ro);
  if (args.output.empty()) {
    std::cout << text << std::flush;
  } else {
    std::ofstream out(args.output, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw util::Fatal("--output: cannot write " + args.output);
  }
  for (const auto& f : rep.findings)
    if (rules::Fails(policy.fail_on, f.severity)) return 1;
  return args.fail_on_empty && !rep.cuda_stack ? 1 : 0;
}

}  // namespace

Runner DefineScan(CLI::App& sub) {
  auto args = std::make_shared<ScanArgs>();
  AddImageArgs(sub, args->image);
  sub.add_option("-f,--format", args->format, report::FormatNames())->capture_default_str();
  sub.add_option("-o,--output", args->output, "write the report to FILE instead of stdout");
  AddRuleArgs(sub, args->rules);
  sub.add_flag("--fail-on-empty", args->fail_on_empty,
               "exit 1 when the image holds no CUDA stack (no CUDA library, toolkit or framework)");
  sub.add_flag("--probe", args->probe,
               "also run the image's cuDNN stack on this host's GPU (runs image code; see probe)");
  AddProbeRunArgs(sub, args->probe_run, "--probe-timeout");
  return [args]() -> int { return Scan(*args); };
}

}  // namespace imgcheck::cli

// `imgcheck scan IMAGE` (also plain `imgcheck IMAGE`): image -> catalog -> loader -> rules ->
// report, and the CI exit code: 0 nothing at or above --fail-on, 1 findings, 2 scan failed.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "catalog/catalog.h"
#include "cli/analysis.h"
#include "cli/commands.h"
#include "probe/session.h"
#include "report/report.h"
#include "rules/config.h"
#include "rules/scan.h"
#include "rules/target.h"
#include "util/error.h"
#include "util/file.h"
#include "util/path.h"

namespace imgcheck::cli {

namespace {

struct ScanArgs {
  ImageArgs image;
  std::string format = "text";
  std::string output;
  std::string fail_on;
  std::string config;
  std::vector<std::string> ignore;
  std::vector<std::string> rules_dirs;
  std::string driver, gpu;
  bool host = false;
  bool fail_on_empty = false;  ///< --fail-on-empty: exit 1 when there is no CUDA stack
  bool probe = false;          ///< --probe: also run the GPU probe (src/probe)
  ProbeRunArgs probe_run;
};

// `command`'s stdout, "" when it cannot run.
std::string Capture(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0 && out.size() < (1u << 16)) out.append(buf, n);
  pclose(p);
  return out;
}

// --host: the driver from /proc/driver/nvidia/version, the GPU (and driver) from nvidia-smi.
void ReadHost(rules::Target& t, const rules::Knowledge& k) {
  if (!t.driver) {
    util::Expected<std::string> proc = util::ReadFile("/proc/driver/nvidia/version");
    if (auto v = rules::ParseProcDriverVersion(proc ? *proc : "")) {
      t.driver = v;
      t.driver_from = "host /proc/driver/nvidia/version";
    }
  }
  auto gpu = rules::ParseNvidiaSmi(Capture(
      "nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null"));
  if (!gpu) {
    t.notes.push_back("--host: nvidia-smi is not available or lists no GPU");
    return;
  }
  if (!t.sm) {
    t.sm = gpu->sm ? gpu->sm : k.GpuSm(gpu->name);
    if (t.sm) t.gpu_from = "host GPU " + gpu->name;
  }
  if (!t.driver && gpu->driver) {
    t.driver = gpu->driver;
    t.driver_from = "host nvidia-smi";
  }
}

rules::Config LoadConfig(const ScanArgs& args, const rules::Knowledge& k) {
  std::string path = args.config;
  if (path.empty()) path = rules::FindConfig(std::filesystem::current_path().string());
  rules::Config config;
  if (!path.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      throw util::Fatal("--config: " + path + " does not exist");
    util::Expected<std::string> text = util::ReadFile(path);
    if (!text) throw util::Fatal("--config: " + text.error().message);
    auto parsed = rules::ParseConfig(path, *text, k);
    if (!parsed) throw util::Fatal(parsed.error().message);
    config = std::move(*parsed);
  }
  for (const auto& list : args.ignore)
    for (const auto& id : util::Split(list, ',')) {
      if (id.empty()) continue;
      const rules::RuleInfo* r = k.Rule(id);
      if (!r) {
        std::string hint = k.SuggestRule(id);
        throw util::Fatal("--ignore: unknown rule '" + id + "'" +
                          (hint.empty() ? "" : "; did you mean " + hint + "?"));
      }
      config.ignores.push_back({r->id, "", "--ignore on the command line", "--ignore"});
    }
  return config;
}

int Scan(const ScanArgs& args) {
  auto format = report::ParseFormat(args.format);
  if (!format)
    throw util::Fatal("--format: unknown format '" + args.format + "' (" + report::FormatNames() +
                      ")");
  rules::Knowledge knowledge = LoadKnowledge(args.rules_dirs);
  rules::Config config = LoadConfig(args, knowledge);
  rules::FailOn fail_on{rules::Severity::kError};
  if (config.fail_on) fail_on = *config.fail_on;
  if (!args.fail_on.empty()) {
    auto parsed = rules::ParseFailOn(args.fail_on);
    if (!parsed)
      throw util::Fatal("--fail-on: '" + args.fail_on + "' is not none, info, warning or error");
    fail_on = *parsed;
  }

  rules::ScanInput input;
  input.knowledge = &knowledge;
  if (!args.driver.empty()) rules::SetDriver(input.target, args.driver, "--driver");
  if (!args.gpu.empty()) rules::SetGpu(input.target, args.gpu, knowledge, "--gpu " + args.gpu);
  if (args.host) ReadHost(input.target, knowledge);
  rules::NoteMissingTarget(input.target, knowledge);

  image::Image img;
  catalog::Catalog cat;
  Analyze(args.image, img, cat, input);

  report::Report rep;
  rep.image = {img.reference, img.transport, img.manifest_digest, img.config_digest,
               args.image.platform};
  rep.findings = rules::RunChecks(input);
  std::string probe_note;
  if (args.probe) {  // the GPU probe's findings join the scan's; without a GPU only a note
    std::cerr << kProbeNotice;
    probe::Session ps =
        probe::RunSession(args.image.reference, ToLoadOptions(args.image, knowledge.libraries()),
                          input, ToRunOptions(args.probe_run));
    if (ps.no_gpu) probe_note = "--probe: no GPU: probe skipped (" + ps.skip_reason + ")";
    if (ps.nothing_to_load) probe_note = "--probe: " + ps.skip_reason;
    rep.findings.insert(rep.findings.end(), ps.findings.begin(), ps.findings.end());
  }
  rep.suppressed = rules::ApplyConfig(config, rep.findings);
  rep.notes = input.target.notes;
  if (!probe_note.empty()) rep.notes.push_back(probe_note);
  rep.diagnostics = img.diagnostics;
  rep.cuda_stack = cat.HasCudaStack();
  rep.diagnostics.insert(rep.diagnostics.end(), cat.diagnostics.begin(), cat.diagnostics.end());
  rep.knowledge = &knowledge;
  rep.tool_version = IMGCHECK_VERSION;

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
    if (rules::Fails(fail_on, f.severity)) return 1;
  return args.fail_on_empty && !rep.cuda_stack ? 1 : 0;
}

}  // namespace

Runner DefineScan(CLI::App& sub) {
  auto args = std::make_shared<ScanArgs>();
  AddImageArgs(sub, args->image);
  sub.add_option("-f,--format", args->format, report::FormatNames())->capture_default_str();
  sub.add_option("-o,--output", args->output, "write the report to FILE instead of stdout");
  sub.add_option("--fail-on", args->fail_on,
                 "exit 1 when a finding is at or above: none|info|warning|error (default error)");
  sub.add_flag("--fail-on-empty", args->fail_on_empty,
               "exit 1 when the image holds no CUDA stack (no CUDA library, toolkit or framework)");
  sub.add_option("--config", args->config,
                 "config file (default: .imgcheck.yaml/.yml/.json in the working directory)");
  sub.add_option("--ignore", args->ignore, "rule IDs to ignore, comma separated (IC051,IC060)");
  AddRulesArg(sub, args->rules_dirs);
  sub.add_option("--driver", args->driver, "target host driver version (e.g. 535.104.05)");
  sub.add_option("--gpu", args->gpu, "target GPU: sm_XY, X.Y or a name (A100, RTX 4090)");
  sub.add_flag("--host", args->host, "use this host's driver and GPU as the target");
  sub.add_flag("--probe", args->probe,
               "also run the image's cuDNN stack on this host's GPU (runs image code; see probe)");
  AddProbeRunArgs(sub, args->probe_run, "--probe-timeout");
  return [args]() -> int { return Scan(*args); };
}

}  // namespace imgcheck::cli

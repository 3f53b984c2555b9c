// `imgcheck scan IMAGE` (also plain `imgcheck IMAGE`): image -> catalog -> loader -> rules ->
// report, and the CI exit code: 0 nothing at or above --fail-on, 1 findings, 2 scan failed.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "catalog/catalog.h"
#include "cli/analysis.h"
#include "cli/commands.h"
#include "image/dockerfile.h"
#include "image/transports.h"
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
  std::vector<std::string> outputs;  ///< FILE (in --format) or FORMAT=FILE, each once
  std::string dockerfile;            ///< --dockerfile: map findings to its lines
  std::string sarif_category;        ///< --sarif-category ("": the reference less tag/digest)
  RuleArgs rules;
  bool fail_on_empty = false;  ///< --fail-on-empty: exit 1 when there is no CUDA stack
  bool probe = false;          ///< --probe: also run the GPU probe (src/probe)
  ProbeRunArgs probe_run;
};

// The Dockerfile's path as code scanning wants it: relative to the repository root (the nearest
// directory above it with a .git), else to the working directory, else as given.
std::string RepositoryPath(const std::string& dockerfile) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(dockerfile, ec), ec);
  for (fs::path dir = abs.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / ".git", ec)) return abs.lexically_relative(dir).generic_string();
    if (dir == dir.parent_path()) break;
  }
  fs::path rel = abs.lexically_relative(fs::current_path(ec));
  return rel.empty() || *rel.begin() == ".." ? dockerfile : rel.generic_string();
}

// Points every finding (reported or ignored) at the Dockerfile instruction behind it.
void MapToDockerfile(const std::string& path, const image::Image& img, report::Report& rep) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw util::Fatal("--dockerfile: " + path + " does not exist");
  util::Expected<std::string> text = util::ReadFile(path);
  if (!text) throw util::Fatal("--dockerfile: " + text.error().message);
  auto df = image::ParseDockerfile(*text);
  if (!df) throw util::Fatal("--dockerfile: " + path + ": " + df.error().message);
  image::BuildMap map = image::MapBuild(*df, img.config.history, img.layers.size());
  std::string shown = RepositoryPath(path);
  auto locate = [&](rules::Finding& f) {
    const image::Instruction* i =
        image::Locate(map, f.layer.index, f.paths.empty() ? "" : f.paths[0], f.env);
    if (i) f.dockerfile = rules::SourceLine{shown, i->line, i->end_line, i->text};
  };
  for (auto& f : rep.findings) locate(f);
  for (auto& s : rep.suppressed) locate(s.finding);
  rep.dockerfile = true;
}

struct Output {
  report::Format format;
  std::string file;  ///< "" for stdout
};

// --format and --output: FILE takes --format; FORMAT=FILE names its own (syft's spelling).
std::vector<Output> Outputs(const ScanArgs& args) {
  auto format = report::ParseFormat(args.format);
  if (!format)
    throw util::Fatal("--format: unknown format '" + args.format + "' (" + report::FormatNames() +
                      ")");
  std::vector<Output> out;
  for (const auto& o : args.outputs) {
    size_t eq = o.find('=');
    std::optional<report::Format> named;
    if (eq != std::string::npos) named = report::ParseFormat(o.substr(0, eq));
    if (named && eq + 1 == o.size()) throw util::Fatal("--output: " + o + " names no file");
    out.push_back(named ? Output{*named, o.substr(eq + 1)} : Output{*format, o});
  }
  if (out.empty()) out.push_back({*format, ""});
  return out;
}

int Scan(const ScanArgs& args) {
  std::vector<Output> outputs = Outputs(args);
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
  auto finish = [&](const rules::ScanInput& input, report::Report& rep) {
    rep.not_run = rules::RulesNotRun(
        input.target, policy.knowledge, rules::ImplementedRules(),
        args.probe ? probe_note : "checked only by the GPU probe (imgcheck scan --probe)");
    if (!args.dockerfile.empty()) MapToDockerfile(args.dockerfile, *input.image, rep);
    if (!probe_note.empty()) rep.notes.push_back(probe_note);
  };
  report::Report rep = ScanReport(args.image, policy, probe_findings, finish);
  rep.sarif_category = args.sarif_category.empty() ? image::WithoutTagOrDigest(args.image.reference)
                                                   : args.sarif_category;

  for (const Output& o : outputs) {
    report::RenderOptions ro;
    ro.color = o.file.empty() && o.format == report::Format::kText && isatty(STDOUT_FILENO) &&
               std::getenv("NO_COLOR") == nullptr;
    std::string text = report::Render(rep, o.format, ro);
    if (o.file.empty()) {
      std::cout << text << std::flush;
    } else {
      std::ofstream out(o.file, std::ios::binary | std::ios::trunc);
      out << text;
      if (!out.flush()) throw util::Fatal("--output: cannot write " + o.file);
    }
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
  sub.add_option("-o,--output", args->outputs,
                 "write the report to FILE instead of stdout; FORMAT=FILE (repeatable) writes "
                 "one report per format from one scan");
  sub.add_option("--dockerfile", args->dockerfile,
                 "the Dockerfile the image was built from: findings name its lines");
  sub.add_option("--sarif-category", args->sarif_category,
                 "SARIF automationDetails category, the same for every build of one image "
                 "(default: the image reference without tag or digest)");
  AddRuleArgs(sub, args->rules);
  sub.add_flag("--fail-on-empty", args->fail_on_empty,
               "exit 1 when the image holds no CUDA stack (no CUDA library, toolkit or framework)");
  sub.add_flag("--probe", args->probe,
               "also run the image's cuDNN stack on this host's GPU (runs image code; see probe)");
  AddProbeRunArgs(sub, args->probe_run, "--probe-timeout");
  return [args]() -> int { return Scan(*args); };
}

}  // namespace imgcheck::cli

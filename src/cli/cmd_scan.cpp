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
#include "probe/session.h"
#include "report/report.h"
#include "rules/config.h"
#include "rules/scan.h"
#include "rules/target.h"
#include "util/error.h"
#include "util/path.h"

namespace imgcheck::cli {

namespace {

struct ScanArgs {
  ImageArgs image;
  std::string format = "text";
  std::vector<std::string> outputs;  ///< FILE (in --format) or FORMAT=FILE, each once
  std::string dockerfile;            ///< --dockerfile: map findings to its lines
  std::string fail_on;
  std::string config;
  std::vector<std::string> ignore;
  std::vector<std::string> rules_dirs;
  std::string driver, gpu;
  bool host = false;
  bool probe = false;  ///< --probe: also run the GPU probe (src/probe)
  ProbeRunArgs probe_run;
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return in ? s.str() : "";
}

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
  if (!t.driver)
    if (auto v = rules::ParseProcDriverVersion(ReadText("/proc/driver/nvidia/version"))) {
      t.driver = v;
      t.driver_from = "host /proc/driver/nvidia/version";
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
    auto parsed = rules::ParseConfig(path, ReadText(path), k);
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
  auto df = image::ParseDockerfile(ReadText(path));
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
  Analyze(args.image, args.rules_dirs, img, cat, input);

  report::Report rep;
  rep.image = {img.reference, img.transport, img.manifest_digest, img.config_digest,
               args.image.platform};
  rep.findings = rules::RunChecks(input);
  std::string probe_note;
  if (args.probe) {  // the GPU probe's findings join the scan's; without a GPU only a note
    std::cerr << kProbeNotice;
    probe::Session ps = probe::RunSession(args.image.reference, ToLoadOptions(args.image), input,
                                          ToRunOptions(args.probe_run));
    if (ps.no_gpu) probe_note = "--probe: no GPU: probe skipped (" + ps.skip_reason + ")";
    if (ps.nothing_to_load) probe_note = "--probe: " + ps.skip_reason;
    rep.findings.insert(rep.findings.end(), ps.findings.begin(), ps.findings.end());
  }
  rep.suppressed = rules::ApplyConfig(config, rep.findings);
  rep.fail_on = fail_on;
  rep.not_run = rules::RulesNotRun(
      input.target, knowledge, rules::ImplementedRules(),
      args.probe ? probe_note : "checked only by the GPU probe (imgcheck scan --probe)");
  if (!args.dockerfile.empty()) MapToDockerfile(args.dockerfile, img, rep);
  rep.notes = input.target.notes;
  if (!probe_note.empty()) rep.notes.push_back(probe_note);
  rep.diagnostics = img.diagnostics;
  rep.diagnostics.insert(rep.diagnostics.end(), cat.diagnostics.begin(), cat.diagnostics.end());
  rep.knowledge = &knowledge;
  rep.tool_version = IMGCHECK_VERSION;

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
    if (rules::Fails(fail_on, f.severity)) return 1;
  return 0;
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
  sub.add_option("--fail-on", args->fail_on,
                 "exit 1 when a finding is at or above: none|info|warning|error (default error)");
  sub.add_option("--config", args->config,
                 "config file (default: .imgcheck.yaml/.yml/.json in the working directory)");
  sub.add_option("--ignore", args->ignore, "rule IDs to ignore, comma separated (IC051,IC060)");
  sub.add_option("--rules", args->rules_dirs,
                 "directory of rule files that add to or override rules/")
      ->check(CLI::ExistingDirectory);
  sub.add_option("--driver", args->driver, "target host driver version (e.g. 535.104.05)");
  sub.add_option("--gpu", args->gpu, "target GPU: sm_XY, X.Y or a name (A100, RTX 4090)");
  sub.add_flag("--host", args->host, "use this host's driver and GPU as the target");
  sub.add_flag("--probe", args->probe,
               "also run the image's cuDNN stack on this host's GPU (runs image code; see probe)");
  AddProbeRunArgs(sub, args->probe_run, "--probe-timeout");
  return [args]() -> int { return Scan(*args); };
}

}  // namespace imgcheck::cli

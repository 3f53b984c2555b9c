#include "cli/analysis.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/build_info.h"
#include "rules/target.h"
#include "util/error.h"
#include "util/file.h"
#include "util/path.h"
#include "util/sha256.h"
#include "util/text.h"

namespace imgcheck::cli {

namespace {

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

rules::Config LoadConfig(const RuleArgs& args, const rules::Knowledge& k, std::string& text) {
  std::string path = args.config;
  if (path.empty()) path = rules::FindConfig(std::filesystem::current_path().string());
  rules::Config config;
  if (!path.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      throw util::Fatal("--config: " + path + " does not exist");
    util::Expected<std::string> read = util::ReadFile(path);
    if (!read) throw util::Fatal("--config: " + read.error().message);
    text = std::move(*read);
    auto parsed = rules::ParseConfig(path, text, k);
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

}  // namespace

void HashTree(const std::string& dir, util::Sha256& h) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) files.push_back(it->path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    util::Expected<std::string> read = util::ReadFile(f);
    if (!read) throw util::Fatal(read.error().message);
    std::string rel = f.lexically_relative(dir).string(), text = std::move(*read);
    for (const std::string* s : {&rel, &text}) {
      std::string len = std::to_string(s->size()) + ":";
      h.Update(len);
      h.Update(*s);
    }
  }
}

std::string TreeDigest(const std::string& dir) {
  util::Sha256 h;
  HashTree(dir, h);
  return "sha256:" + h.HexDigest();
}

void Analyze(const ImageArgs& args, image::Image& image, catalog::Catalog& catalog,
             rules::ScanInput& input) {
  const rules::Knowledge& k = *input.knowledge;
  image = image::Load(args.reference, ToLoadOptions(args, k.libraries()));
  catalog = catalog::Build(image, k.libraries(), args.limits);
  input.image = &image;
  input.catalog = &catalog;
  util::Expected<loader::Options> options = rules::LoaderOptions(image, catalog, k.dlopen());
  if (!options) {
    input.target.notes.push_back(options.error().message);  // the loader's rules stay silent
    return;
  }
  input.options = std::move(*options);
  input.options.limits = args.limits;
  input.consumers = rules::LoadConsumers(image, catalog, k, input.options);
}

void AddRuleArgs(CLI::App& sub, RuleArgs& args) {
  sub.add_option("--fail-on", args.fail_on,
                 "exit 1 when a finding is at or above: none|info|warning|error (default error)");
  sub.add_option("--config", args.config,
                 "config file (default: .imgcheck.yaml/.yml/.json in the working directory)");
  sub.add_option("--ignore", args.ignore, "rule IDs to ignore, comma separated (IC051,IC060)");
  AddRulesArg(sub, args.rules_dirs);
  sub.add_option("--driver", args.driver, "target host driver version (e.g. 535.104.05)");
  sub.add_option("--gpu", args.gpu, "target GPU: sm_XY, X.Y or a name (A100, RTX 4090)");
  sub.add_flag("--host", args.host, "use this host's driver and GPU as the target");
}

Policy LoadPolicy(const RuleArgs& args) {
  Policy p;
  p.rules_dirs = args.rules_dirs;
  p.knowledge = LoadKnowledge(args.rules_dirs);
  std::string config_text;
  p.config = LoadConfig(args, p.knowledge, config_text);
  if (p.config.fail_on) p.fail_on = *p.config.fail_on;
  if (!args.fail_on.empty()) {
    auto parsed = rules::ParseFailOn(args.fail_on);
    if (!parsed)
      throw util::Fatal("--fail-on: '" + args.fail_on + "' is not none, info, warning or error");
    p.fail_on = *parsed;
  }
  if (!args.driver.empty()) rules::SetDriver(p.target, args.driver, "--driver");
  if (!args.gpu.empty()) rules::SetGpu(p.target, args.gpu, p.knowledge, "--gpu " + args.gpu);
  if (args.host) ReadHost(p.target, p.knowledge);
  rules::NoteMissingTarget(p.target, p.knowledge);

  util::Sha256 h;
  h.Update("imgcheck " + std::string(BuildVersion()) + "\n");
  HashTree(RulesDir(), h);
  for (const auto& d : args.rules_dirs) HashTree(d, h);
  std::string rest = config_text + "\n" + args.fail_on + "\n" + args.driver + "\n" + args.gpu +
                     "\n" + (p.target.driver ? p.target.driver->str() : "") + "\n" +
                     std::to_string(p.target.sm.value_or(0));
  for (const auto& i : args.ignore) rest += "\n" + i;
  h.Update(rest);
  p.identity = "sha256:" + h.HexDigest();
  return p;
}

report::Report ScanReport(const ImageArgs& args, const Policy& policy, const ExtraFindings& extra,
                          const ExtraFindings& finish) {
  rules::ScanInput input;
  input.knowledge = &policy.knowledge;
  input.target = policy.target;
  image::Image img;
  catalog::Catalog cat;
  Analyze(args, img, cat, input);

  report::Report rep;
  rep.image = {img.reference, img.transport, img.manifest_digest, img.config_digest, args.platform};
  rep.findings = rules::RunChecks(input);
  if (extra) extra(input, rep);
  rep.suppressed = rules::ApplyConfig(policy.config, rep.findings);
  rep.fail_on = policy.fail_on;
  rep.notes = input.target.notes;
  rep.cuda_stack = cat.HasCudaStack();
  rep.diagnostics = img.diagnostics;
  rep.diagnostics.insert(rep.diagnostics.end(), cat.diagnostics.begin(), cat.diagnostics.end());
  rep.knowledge = &policy.knowledge;
  rep.tool_version = BuildVersion();
  if (finish) finish(input, rep);
  return rep;
}

void AddProbeRunArgs(CLI::App& sub, ProbeRunArgs& args, const std::string& timeout_flag) {
  sub.add_option(timeout_flag, args.timeout, "seconds before the probe process is killed")
      ->capture_default_str()
      ->check(CLI::Range(1, probe::kMaxProbeSeconds));
  // For tests only: a fake driver library stands in for the host's libcuda.so.1.
  sub.add_option("--test-libcuda", args.libcuda)->group("");
}

probe::RunOptions ToRunOptions(const ProbeRunArgs& args) {
  probe::RunOptions run;
  run.executable = probe::ProbeExecutable();
  run.libcuda = args.libcuda;
  run.wall_seconds = args.timeout;
  run.cpu_seconds = args.timeout;
  return run;
}

}  // namespace imgcheck::cli

#include "scan/policy.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "rules/update.h"
#include "scan/build_info.h"
#include "util/error.h"
#include "util/file.h"
#include "util/path.h"
#include "util/profile.h"
#include "util/sha256.h"
#include "util/text.h"

namespace imgcheck::scan {

namespace {
std::string& RulesCacheOption() {
  static std::string dir;
  return dir;
}

rules::SignatureCheck& SignatureCheckOption() {
  static rules::SignatureCheck check;
  return check;
}
}  // namespace

void SetRulesCache(const std::string& dir) { RulesCacheOption() = dir; }
void SetRulesSignatureCheck(rules::SignatureCheck check) {
  SignatureCheckOption() = std::move(check);
}
const std::string& RulesCache() { return RulesCacheOption(); }

std::string BundledRulesDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path installed = exe.parent_path() / "../share/imgcheck/rules";
    if (std::filesystem::is_directory(installed, ec)) return installed.lexically_normal().string();
  }
  return IMGCHECK_RULES_DIR;
}

std::string RulesDir() {
  if (const char* env = std::getenv("IMGCHECK_RULES_DIR"); env != nullptr && *env != '\0')
    return env;
  std::string note;
  std::string dir = rules::ChooseRulesDir(rules::RulesCacheDir(RulesCache()), BundledRulesDir(),
                                          SignatureCheckOption(), &note);
  static std::string said;  // once per process, though every reload asks again
  if (!note.empty() && note != said) {
    std::cerr << "imgcheck: note: " << note << "; using the bundled data\n";
    said = note;
  }
  return dir;
}

rules::Knowledge LoadKnowledge(const std::vector<std::string>& rules_dirs) {
  std::vector<std::string> dirs = {RulesDir()};
  dirs.insert(dirs.end(), rules_dirs.begin(), rules_dirs.end());
  return rules::Knowledge::Load(dirs);
}

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
void ReadHost(rules::Target& target, const rules::Knowledge& knowledge) {
  if (!target.driver) {
    util::Expected<std::string> proc = util::ReadFile("/proc/driver/nvidia/version");
    if (auto v = rules::ParseProcDriverVersion(proc ? *proc : "")) {
      target.driver = v;
      target.driver_from = "host /proc/driver/nvidia/version";
    }
  }
  auto gpu = rules::ParseNvidiaSmi(Capture(
      "nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null"));
  if (!gpu) {
    target.notes.push_back("--host: nvidia-smi is not available or lists no GPU");
    return;
  }
  if (!target.sm) {
    target.sm = gpu->sm ? gpu->sm : knowledge.GpuSm(gpu->name);
    if (target.sm) target.gpu_from = "host GPU " + gpu->name;
  }
  if (!target.driver && gpu->driver) {
    target.driver = gpu->driver;
    target.driver_from = "host nvidia-smi";
  }
}

rules::Config LoadConfig(const PolicyArgs& args, const rules::Knowledge& knowledge,
                         std::string& text) {
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
    auto parsed = rules::ParseConfig(path, text, knowledge);
    if (!parsed) throw util::Fatal(parsed.error().message);
    config = std::move(*parsed);
  }
  for (const auto& list : args.ignore)
    for (const auto& id : util::Split(list, ',')) {
      if (id.empty()) continue;
      const rules::RuleInfo* r = knowledge.Rule(id);
      if (!r) {
        std::string hint = knowledge.SuggestRule(id);
        throw util::Fatal("--ignore: unknown rule '" + id + "'" +
                          (hint.empty() ? "" : "; did you mean " + hint + "?"));
      }
      config.ignores.push_back({r->id, "", "--ignore on the command line", "--ignore"});
    }
  return config;
}

// Every regular file under `dir`, by relative path, into `h` (the rule data's identity).
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

// The policy's identity: the tool, the rule data in use, the config's text and the flags. The
// data's version digests every file that was loaded, as it was merged (rules::DataVersion): the
// files are not read and hashed again.
std::string Identity(const PolicyArgs& args, const Policy& p, const std::string& config_text) {
  util::Sha256 h;
  h.Update("imgcheck " + std::string(BuildVersion()) + "\n");
  const rules::DataVersion& data = p.knowledge.version();
  h.Update("rules " + data.date + " " + data.digest + "\n");
  std::string rest = config_text + "\n" + args.fail_on + "\n" + args.driver + "\n" + args.gpu +
                     "\n" + (p.target.driver ? p.target.driver->str() : "") + "\n" +
                     std::to_string(p.target.sm.value_or(0));
  for (const auto& i : args.ignore) rest += "\n" + i;
  h.Update(rest);
  return "sha256:" + h.HexDigest();
}

}  // namespace

std::string TreeDigest(const std::string& dir) {
  util::Sha256 h;
  HashTree(dir, h);
  return "sha256:" + h.HexDigest();
}

std::string Policy::ShortIdentity() const { return identity.substr(identity.find(':') + 1, 16); }

Policy LoadPolicy(const PolicyArgs& args) {
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
  p.identity = Identity(args, p, config_text);
  return p;
}

}  // namespace imgcheck::scan

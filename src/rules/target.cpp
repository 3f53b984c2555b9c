#include "rules/target.h"

#include <algorithm>

#include "util/error.h"
#include "util/path.h"

namespace imgcheck::rules {

std::optional<Version> ParseProcDriverVersion(std::string_view text) {
  constexpr std::string_view kMarker = "Kernel Module";
  size_t at = text.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + kMarker.size());
  while (!rest.empty() && (rest[0] == ' ' || rest[0] == '\t')) rest.remove_prefix(1);
  // Open kernel modules print "for x86_64  535.104.05"; skip words until a version.
  while (!rest.empty()) {
    if (auto v = Version::Parse(rest); v && v->size() >= 2) return v;
    size_t space = rest.find(' ');
    if (space == std::string_view::npos) break;
    rest.remove_prefix(space);
    while (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
  }
  return std::nullopt;
}

std::optional<SmiGpu> ParseNvidiaSmi(std::string_view csv) {
  std::string_view line = csv.substr(0, csv.find('\n'));
  std::vector<std::string> fields = util::Split(line, ',');
  if (fields.empty() || fields[0].empty()) return std::nullopt;
  auto trim = [](std::string s) {
    while (!s.empty() && (s.front() == ' ')) s.erase(0, 1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
    return s;
  };
  SmiGpu g;
  g.name = trim(fields[0]);
  if (fields.size() > 1)
    if (auto v = Version::Parse(trim(fields[1])); v && v->size() == 2)
      g.sm = v->major() * 10 + v->minor();
  if (fields.size() > 2) g.driver = Version::Parse(trim(fields[2]));
  return g;
}

void SetDriver(Target& target, std::string_view version, std::string from) {
  auto v = Version::Parse(version);
  if (!v || v->str().size() != version.size())
    throw util::Fatal("--driver: \"" + std::string(version) +
                      "\" is not a driver version (e.g. 535.104.05)");
  target.driver = v;
  target.driver_from = std::move(from);
}

void SetGpu(Target& target, std::string_view gpu, const Knowledge& knowledge, std::string from) {
  auto sm = knowledge.GpuSm(gpu);
  if (!sm)
    throw util::Fatal(
        "--gpu: unknown GPU \"" + std::string(gpu) +
        "\"; give its compute capability as sm_XY (e.g. sm_86) or a name from rules/gpus.json");
  target.sm = sm;
  target.gpu_from = std::move(from);
}

namespace {

// Why a rule needing a target stays silent under `target`; "" when it can run.
std::string MissingTarget(const RuleInfo& r, const Target& target) {
  if (r.needs_target == "driver" && !target.driver)
    return "no target driver (--driver VERSION or --host)";
  if (r.needs_target == "gpu" && !target.sm) return "no target GPU (--gpu NAME|sm_XY or --host)";
  return "";
}

}  // namespace

void NoteMissingTarget(Target& target, const Knowledge& knowledge) {
  for (const auto& r : knowledge.rules())
    if (std::string why = MissingTarget(r, target); !why.empty())
      target.notes.push_back(r.id + " (" + r.name + ")" + std::string(kStaysSilent) + why);
}

std::vector<NotRun> RulesNotRun(const Target& target, const Knowledge& knowledge,
                                const std::vector<std::string>& static_rules,
                                std::string_view no_probe) {
  std::vector<NotRun> out;
  for (const auto& r : knowledge.rules()) {
    if (std::string why = MissingTarget(r, target); !why.empty()) {
      out.push_back({r.id, why, true});
    } else if (!no_probe.empty() &&
               std::find(static_rules.begin(), static_rules.end(), r.id) == static_rules.end()) {
      out.push_back({r.id, std::string(no_probe)});
    }
  }
  return out;
}

}  // namespace imgcheck::rules

#include "rules/finding.h"

#include <algorithm>
#include <set>

#include "rules/knowledge.h"
#include "util/path.h"

namespace imgcheck::rules {

Finding MakeFinding(const Knowledge& knowledge, std::string_view rule, std::string message) {
  Finding f;
  f.rule = std::string(rule);
  if (const RuleInfo* info = knowledge.Rule(rule)) {
    f.name = info->name;
    f.severity = info->severity;
    f.remediation = info->remediation;
  } else {
    f.name = f.rule;  // a --rules directory without the rule (probe.json): still report it
  }
  f.message = std::move(message);
  return f;
}

Evidence ResolvedEvidence(const loader::Resolution& r) { return {"resolved " + r.name, "", r}; }

std::string UnresolvedText(const loader::Resolution& r) {
  if (r.status == loader::Status::kError) return "error: " + r.error;
  std::string s = "not found; tried";
  std::set<std::string> dirs;
  for (const auto& a : r.tried) {
    std::string d(util::DirName(a.path));
    if (dirs.insert(d).second) s += " " + d;
  }
  return dirs.empty() ? "not found" : s;
}

void SortFindings(std::vector<Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    if (a.rule != b.rule) return a.rule < b.rule;
    return a.paths < b.paths;
  });
}

}  // namespace imgcheck::rules

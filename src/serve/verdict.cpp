#include "serve/verdict.h"

#include <nlohmann/json.hpp>

namespace imgcheck::serve {

bool Verdict::Fails(rules::FailOn gate) const {
  for (const auto& f : findings)
    if (rules::Fails(gate, f.severity)) return true;
  return false;
}

Verdict VerdictOf(const report::Report& report) {
  Verdict v;
  v.digest = report.image.manifest_digest;
  v.reference = report.image.reference;
  for (const rules::Finding& f : report.findings)
    v.findings.push_back(
        {f.rule, f.name, f.severity, f.message, f.paths.empty() ? "" : f.paths[0], f.remediation});
  v.report = report::RenderJson(report);
  return v;
}

util::Expected<Verdict> ParseVerdict(std::string_view report) {
  nlohmann::json j = nlohmann::json::parse(report, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("schema", "") != "imgcheck-report/1")
    return util::MakeError("not an imgcheck-report/1 document");
  Verdict v;
  try {
    v.digest = j.at("image").at("manifest_digest").get<std::string>();
    v.reference = j.at("image").at("reference").get<std::string>();
    for (const auto& f : j.at("findings")) {
      VerdictFinding vf;
      vf.rule = f.at("rule").get<std::string>();
      vf.name = f.value("name", "");
      auto sev = rules::ParseSeverity(f.at("severity").get<std::string>());
      if (!sev) return util::MakeError("finding " + vf.rule + ": unknown severity");
      vf.severity = *sev;
      vf.message = f.value("message", "");
      if (f.contains("paths") && f["paths"].is_array() && !f["paths"].empty() &&
          f["paths"][0].is_string())
        vf.path = f["paths"][0].get<std::string>();
      vf.remediation = f.value("remediation", "");
      v.findings.push_back(std::move(vf));
    }
  } catch (const nlohmann::json::exception& e) {
    return util::MakeError(std::string("malformed report: ") + e.what());
  }
  v.source = j.value("verdict_source", "scan");
  v.report = std::string(report);
  return v;
}

std::string FindingLine(const VerdictFinding& f) {
  std::string s = f.rule + " " + f.name;
  if (!f.path.empty()) s += " in " + f.path;
  if (!f.remediation.empty()) s += "; fix: " + f.remediation;
  return s;
}

}  // namespace imgcheck::serve

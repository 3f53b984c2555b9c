// SARIF 2.1.0 (https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html), in the shape
// GitHub code scanning accepts: tool.driver.rules with help, results with ruleId, level,
// message and a location whose artifactLocation.uri is the path inside the image.
#include <nlohmann/json.hpp>

#include "report/escape.h"
#include "report/report.h"

namespace imgcheck::report {

namespace {

std::string Level(rules::Severity s) {
  switch (s) {
    case rules::Severity::kError:
      return "error";
    case rules::Severity::kWarning:
      return "warning";
    case rules::Severity::kInfo:
      return "note";
  }
  return "error";
}

nlohmann::ordered_json RuleJson(const rules::RuleInfo& r) {
  std::string errors;
  for (const auto& e : r.errors) errors += "\n    " + e;
  std::string text = r.summary + "\n\nWhy it breaks: " + r.breaks + "\n\nWhat users see:" + errors +
                     "\n\nFix: " + r.remediation;
  std::string markdown = "**" + r.summary + "**\n\n" + r.breaks + "\n\nWhat users see:\n";
  for (const auto& e : r.errors) markdown += "\n    " + e;
  markdown += "\n\n**Fix:** " + r.remediation + "\n\nSource: " + r.source;
  nlohmann::ordered_json j;
  j["id"] = r.id;
  j["name"] = r.name;
  j["shortDescription"] = {{"text", r.summary}};
  j["fullDescription"] = {{"text", r.breaks}};
  j["help"] = {{"text", text}, {"markdown", markdown}};
  j["defaultConfiguration"] = {{"level", Level(r.severity)}};
  j["properties"] = {{"tags", {"cuda", "container"}}};
  return j;
}

}  // namespace

std::string RenderSarif(const Report& report) {
  // The driver lists the rules the results use, in ID order, so ruleIndex is stable.
  std::vector<const rules::RuleInfo*> used;
  if (report.knowledge)
    for (const auto& r : report.knowledge->rules())
      for (const auto& f : report.findings)
        if (f.rule == r.id) {
          used.push_back(&r);
          break;
        }
  nlohmann::ordered_json driver;
  driver["name"] = "imgcheck";
  driver["version"] = report.tool_version;
  driver["informationUri"] = "https://github.com/imgcheck/imgcheck";
  driver["rules"] = nlohmann::ordered_json::array();
  for (const auto* r : used) driver["rules"].push_back(RuleJson(*r));

  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& f : report.findings) {
    nlohmann::ordered_json res;
    res["ruleId"] = f.rule;
    for (size_t i = 0; i < used.size(); ++i)
      if (used[i]->id == f.rule) res["ruleIndex"] = i;
    res["level"] = Level(f.severity);
    res["message"] = {{"text", f.message}};
    nlohmann::ordered_json locations = nlohmann::ordered_json::array();
    // Findings about the image configuration (no path) point at the image root.
    std::vector<std::string> paths = f.paths.empty() ? std::vector<std::string>{"/"} : f.paths;
    for (const auto& p : paths)
      locations.push_back({{"physicalLocation", {{"artifactLocation", {{"uri", p}}}}}});
    res["locations"] = locations;
    nlohmann::ordered_json props;
    props["image"] = report.image.reference;
    if (f.layer.index >= 0)
      props["layer"] = {
          {"index", f.layer.index}, {"digest", f.layer.digest}, {"created_by", f.layer.created_by}};
    props["remediation"] = f.remediation;
    nlohmann::ordered_json evidence = nlohmann::ordered_json::array();
    for (const auto& e : f.evidence) evidence.push_back(e.label + ": " + EvidenceValue(e));
    props["evidence"] = evidence;
    res["properties"] = props;
    results.push_back(std::move(res));
  }
  nlohmann::ordered_json run;
  run["tool"] = {{"driver", driver}};
  run["results"] = results;
  nlohmann::ordered_json j;
  j["$schema"] = "https://json.schemastore.org/sarif-2.1.0.json";
  j["version"] = "2.1.0";
  j["runs"] = nlohmann::ordered_json::array({run});
  return DumpJson(j, 2) + "\n";
}

}  // namespace imgcheck::report

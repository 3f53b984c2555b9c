// SARIF 2.1.0 (https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html), in the shape
// GitHub code scanning reads (docs.github.com "SARIF support for code scanning"): rules with help
// and helpUri; one result per finding with partialFingerprints (alerts are tracked across scans
// by them); a physical location on the Dockerfile line when --dockerfile mapped the finding (for
// one the configuration causes, the ENV/ARG line, with the instruction that wrote the file as a
// related location), the path inside the image as a logical location always; ignored findings as
// suppressions; one automationDetails.id per image, so scans of several images do not close each
// other's alerts.
#include <array>
#include <nlohmann/json.hpp>

#include "report/escape.h"
#include "report/report.h"
#include "util/names.h"
#include "util/text.h"

namespace imgcheck::report {

namespace {

constexpr const char* kInformationUri = "https://github.com/imgcheck/imgcheck";
constexpr const char* kImageRoot = "IMAGE_ROOT";

// RFC 3986 path: everything but unreserved characters and '/' percent-encoded (SARIF 3.10.2).
std::string PercentEncode(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : path) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// A Dockerfile instruction as a SARIF physical location (relative to the repository root).
nlohmann::ordered_json DockerfileLocation(const rules::SourceLine& d) {
  return {
      {"artifactLocation", {{"uri", PercentEncode(d.path)}, {"uriBaseId", "%SRCROOT%"}}},
      {"region",
       {{"startLine", d.line}, {"endLine", d.end_line}, {"snippet", {{"text", d.instruction}}}}}};
}

// Where a finding is. GitHub rejects a whole file when one location lacks a physical location,
// so every finding has one: the Dockerfile line when --dockerfile mapped it, else the main path
// relative to the image's root file system (uriBaseId kImageRoot, a base GitHub cannot resolve:
// the alert shows without source). The logical locations name the image paths and the variable.
nlohmann::ordered_json Locations(const rules::Finding& f) {
  nlohmann::ordered_json logical = nlohmann::ordered_json::array();
  for (const auto& p : f.paths)
    logical.push_back({{"fullyQualifiedName", p}, {"kind", "resource"}});
  if (!f.env.empty())
    logical.push_back(
        {{"name", f.env}, {"fullyQualifiedName", "Env/" + f.env}, {"kind", "variable"}});
  // A finding about the image as a whole points at its root.
  if (logical.empty()) logical.push_back({{"fullyQualifiedName", "/"}, {"kind", "resource"}});
  nlohmann::ordered_json location;
  if (f.dockerfile) {
    location["physicalLocation"] = DockerfileLocation(*f.dockerfile);
  } else {
    std::string path = f.paths.empty() ? "/" : f.paths[0];
    size_t skip = path.find_first_not_of('/');
    std::string rel = skip == std::string::npos ? "." : path.substr(skip);
    location["physicalLocation"] = {
        {"artifactLocation", {{"uri", PercentEncode(rel)}, {"uriBaseId", kImageRoot}}}};
  }
  location["logicalLocations"] = logical;
  return nlohmann::ordered_json::array({location});
}

// SARIF's result.level for each severity (section 3.27.10).
constexpr auto kLevels =
    std::to_array<util::EnumName<rules::Severity>>({{rules::Severity::kError, "error"},
                                                    {rules::Severity::kWarning, "warning"},
                                                    {rules::Severity::kInfo, "note"}});
static_assert(util::NamesEvery(kLevels));

std::string Level(rules::Severity s) { return std::string(util::Name(kLevels, s, "error")); }

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
  j["helpUri"] = std::string(kInformationUri) + "/blob/main/rules/README.md#" +
                 util::AsciiLower(r.id) + "-" + r.name;
  j["shortDescription"] = {{"text", r.summary}};
  j["fullDescription"] = {{"text", r.breaks}};
  j["help"] = {{"text", text}, {"markdown", markdown}};
  j["defaultConfiguration"] = {{"level", Level(r.severity)}};
  j["properties"] = {{"tags", {"cuda", "container"}}};
  return j;
}

}  // namespace

std::string RenderSarif(const Report& report) {
  // Reported and suppressed findings alike are results; the latter carry their suppression.
  std::vector<const rules::Finding*> all;
  for (const auto& f : report.findings) all.push_back(&f);
  for (const auto& sup : report.suppressed) all.push_back(&sup.finding);

  // The driver lists the rules the results use, in ID order, so ruleIndex is stable.
  std::vector<const rules::RuleInfo*> used;
  if (report.knowledge)
    for (const auto& r : report.knowledge->rules())
      for (const auto* f : all)
        if (f->rule == r.id) {
          used.push_back(&r);
          break;
        }
  nlohmann::ordered_json driver;
  driver["name"] = "imgcheck";
  driver["version"] = report.tool_version;
  driver["informationUri"] = kInformationUri;
  driver["rules"] = nlohmann::ordered_json::array();
  for (const auto* r : used) driver["rules"].push_back(RuleJson(*r));
  // The rule data is a tool component of its own (SARIF 2.1.0 section 3.19.3, extensions).
  nlohmann::ordered_json data{{"name", "imgcheck-rules"}, {"version", report.rules_version}};

  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (size_t i = 0; i < all.size(); ++i) {
    const rules::Finding& f = *all[i];
    nlohmann::ordered_json res;
    res["ruleId"] = f.rule;
    for (size_t u = 0; u < used.size(); ++u)
      if (used[u]->id == f.rule) res["ruleIndex"] = u;
    res["level"] = Level(f.severity);
    res["message"] = {{"text", f.message}};
    res["locations"] = Locations(f);
    // A finding the configuration causes is on its ENV/ARG line; the instruction that wrote the
    // file is where the problem came from too (SARIF 3.27.22, relatedLocations).
    if (f.written_by)
      res["relatedLocations"] = nlohmann::ordered_json::array(
          {{{"id", 1},
            {"physicalLocation", DockerfileLocation(*f.written_by)},
            {"message", {{"text", "wrote " + (f.paths.empty() ? "the file" : f.paths[0])}}}}});
    // v2: rule, owning package and library base name (scan/fingerprint.h); v1 hashed the path,
    // which moved with a rebuild.
    if (!f.fingerprint.empty()) res["partialFingerprints"] = {{"imgcheck/v2", f.fingerprint}};
    // Against a baseline (SARIF 2.1.0 section 3.27.24): what it had and what is new.
    if (report.baseline) res["baselineState"] = f.baseline ? "unchanged" : "new";
    if (i >= report.findings.size()) {
      const rules::Ignore& ig = report.suppressed[i - report.findings.size()].ignore;
      res["suppressions"] =
          nlohmann::ordered_json::array({{{"kind", "external"},
                                          {"status", "accepted"},
                                          {"justification", ig.reason + " (" + ig.where + ")"}}});
    }
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
  run["tool"] = {{"driver", driver}, {"extensions", nlohmann::ordered_json::array({data})}};
  run["originalUriBaseIds"] = {
      {kImageRoot,
       {{"description", {{"text", "the root file system of " + report.image.reference}}}}}};
  // GitHub's category is the part before the last '/': one per image repository (--sarif-category),
  // the same from build to build, or a new build's scan would never close the old one's alerts.
  const std::string& category =
      report.sarif_category.empty() ? report.image.reference : report.sarif_category;
  run["automationDetails"] = {{"id", "imgcheck/" + category + "/"}};
  run["results"] = results;
  nlohmann::ordered_json j;
  j["$schema"] = "https://json.schemastore.org/sarif-2.1.0.json";
  j["version"] = "2.1.0";
  j["runs"] = nlohmann::ordered_json::array({run});
  return DumpJson(j, 2) + "\n";
}

}  // namespace imgcheck::report

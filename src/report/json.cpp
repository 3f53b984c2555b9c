// The JSON report, schema "imgcheck-report/1" (documented in rules/README.md).
#include "report/json.h"

#include <nlohmann/json.hpp>

#include "report/diagnostics.h"
#include "report/escape.h"
#include "report/image_header.h"
#include "report/report.h"

namespace imgcheck::report {

nlohmann::ordered_json FindingJson(const rules::Finding& f, bool dockerfile) {
  nlohmann::ordered_json j;
  j["rule"] = f.rule;
  j["name"] = f.name;
  j["severity"] = rules::SeverityName(f.severity);
  j["message"] = f.message;
  j["paths"] = f.paths;
  j["fingerprint"] = f.fingerprint;
  j["baseline"] = f.baseline;
  nlohmann::ordered_json layer;
  if (f.layer.index >= 0) {
    layer["index"] = f.layer.index;
    layer["digest"] = f.layer.digest;
    layer["created_by"] = f.layer.created_by;
  }
  j["layer"] = f.layer.index >= 0 ? layer : nlohmann::ordered_json(nullptr);
  j["remediation"] = f.remediation;
  j["evidence"] = nlohmann::ordered_json::array();
  for (const auto& e : f.evidence) {
    nlohmann::ordered_json one = {{"label", e.label}, {"value", EvidenceValue(e)}};
    // The loader's answer, for tools that draw or compare load chains.
    if (e.resolution)
      one["resolution"] = {{"consumer", e.resolution->consumer},
                           {"name", e.resolution->name},
                           {"found", e.resolution->found()},
                           {"real_path", e.resolution->real_path}};
    j["evidence"].push_back(std::move(one));
  }
  auto line = [](const std::optional<rules::SourceLine>& d) {
    return d ? nlohmann::ordered_json{{"path", d->path},
                                      {"line", d->line},
                                      {"end_line", d->end_line},
                                      {"instruction", d->instruction}}
             : nlohmann::ordered_json(nullptr);
  };
  if (dockerfile) {  // present only when the scan was given --dockerfile; null when unmapped
    j["dockerfile"] = line(f.dockerfile);
    // A configuration finding's ENV/ARG line above; the instruction that wrote the file here.
    if (f.written_by) j["written_by"] = line(f.written_by);
  }
  return j;
}

std::string RenderJson(const Report& report) {
  nlohmann::ordered_json j;
  j["schema"] = "imgcheck-report/1";
  j["tool"] = {{"name", "imgcheck"},
               {"version", report.tool_version},
               {"rules_version", report.rules_version}};
  j["image"] = ImageJson(report.image);
  j["cuda_stack"] = report.cuda_stack;
  size_t counts[3] = {0, 0, 0};
  for (const auto& f : report.findings) ++counts[static_cast<int>(f.severity)];
  j["summary"] = {{"error", counts[2]},
                  {"warning", counts[1]},
                  {"info", counts[0]},
                  {"suppressed", report.suppressed.size()}};
  j["findings"] = nlohmann::ordered_json::array();
  for (const auto& f : report.findings) j["findings"].push_back(FindingJson(f, report.dockerfile));
  j["suppressed"] = nlohmann::ordered_json::array();
  for (const auto& s : report.suppressed) {
    auto one = FindingJson(s.finding, report.dockerfile);
    one["ignored_by"] = {
        {"reason", s.ignore.reason}, {"where", s.ignore.where}, {"path", s.ignore.path}};
    j["suppressed"].push_back(std::move(one));
  }
  j["notes"] = report.notes;
  j["diagnostics"] = nlohmann::ordered_json::array();
  for (const auto& d : report.diagnostics) j["diagnostics"].push_back(DiagnosticJson(d));
  return DumpJson(j, 2) + "\n";
}

}  // namespace imgcheck::report

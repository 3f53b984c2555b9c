#include "report/report.h"

namespace imgcheck::report {

const std::vector<FormatInfo>& Formats() {
  static const std::vector<FormatInfo> kFormats = {
      {"text", Format::kText, "grouped by severity, for people (colour on a terminal)"},
      {"json", Format::kJson, "imgcheck-report/1 JSON: image, findings, suppressed, notes"},
      {"sarif", Format::kSarif, "SARIF 2.1.0, for code-scanning uploads"},
      {"junit", Format::kJunit, "JUnit XML, one test case per rule"},
  };
  return kFormats;
}

std::optional<Format> ParseFormat(std::string_view name) {
  for (const auto& f : Formats())
    if (f.name == name) return f.format;
  return std::nullopt;
}

std::string FormatNames() {
  std::string out;
  for (const auto& f : Formats()) out += (out.empty() ? "" : "|") + std::string(f.name);
  return out;
}

std::string Render(const Report& report, Format format, const RenderOptions& options) {
  switch (format) {
    case Format::kText:
      return RenderText(report, options);
    case Format::kJson:
      return RenderJson(report);
    case Format::kSarif:
      return RenderSarif(report);
    case Format::kJunit:
      return RenderJunit(report);
  }
  return RenderText(report, options);
}

std::string ResolutionText(const loader::Resolution& r) {
  if (!r.found()) return rules::UnresolvedText(r);
  std::string s = r.real_path + " (" + std::string(loader::ReasonName(r.reason));
  if (!r.entry.empty() && r.entry != r.real_path) s += " " + r.entry;
  return s + ")";
}

std::string EvidenceValue(const rules::Evidence& e) {
  return e.resolution ? ResolutionText(*e.resolution) : e.value;
}

}  // namespace imgcheck::report

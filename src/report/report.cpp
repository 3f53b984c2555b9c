#include "report/report.h"

#include <map>

#include "util/sha256.h"

namespace imgcheck::report {

const std::vector<FormatInfo>& Formats() {
  static const std::vector<FormatInfo> kFormats = {
      {"text", Format::kText, "grouped by severity, for people (colour on a terminal)"},
      {"json", Format::kJson, "imgcheck-report/1 JSON: image, findings, suppressed, notes"},
      {"sarif", Format::kSarif, "SARIF 2.1.0, for code-scanning uploads"},
      {"junit", Format::kJunit, "JUnit XML, one test case per rule"},
      {"codequality", Format::kCodeQuality, "GitLab Code Quality JSON, for merge requests"},
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

std::vector<std::string> Fingerprints(const std::vector<const rules::Finding*>& findings) {
  std::vector<std::string> out;
  std::map<std::string, int> seen;
  for (const auto* f : findings) {
    std::string key = f->rule + '\0' + (f->paths.empty() ? "" : f->paths[0]) + '\0' + f->env;
    std::string hex = util::Sha256Digest(key).substr(7);  // "sha256:" dropped
    int n = ++seen[hex];
    out.push_back(n == 1 ? hex : hex + "#" + std::to_string(n));
  }
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
    case Format::kCodeQuality:
      return RenderCodeQuality(report);
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

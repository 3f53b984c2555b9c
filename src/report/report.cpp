#include "report/report.h"

namespace imgcheck::report {

bool Fails(const Report& report, const rules::Finding& f) {
  return !f.baseline && rules::Fails(report.fail_on, f.severity);
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
    case Format::kMarkdown:
      return RenderMarkdown(report);
  }
  return RenderText(report, options);
}

std::string ResolutionText(const loader::Resolution& r) {
  if (!r.found()) return rules::UnresolvedText(r);
  return r.real_path + " (" + ResolutionReason(r) + ")";
}

std::string ResolutionReason(const loader::Resolution& r) {
  if (!r.found()) return rules::UnresolvedText(r);
  std::string s(loader::ReasonName(r.reason));
  if (!r.entry.empty() && r.entry != r.real_path) s += " " + r.entry;
  return s;
}

std::string EvidenceValue(const rules::Evidence& e) {
  return e.resolution ? ResolutionText(*e.resolution) : e.value;
}

}  // namespace imgcheck::report

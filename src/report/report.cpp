#include "report/report.h"

#include <map>

#include "util/sha256.h"

namespace imgcheck::report {

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

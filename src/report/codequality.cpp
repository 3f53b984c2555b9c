// GitLab Code Quality (docs.gitlab.com "Code Quality report format"): a JSON array of issues with
// description, check_name, fingerprint, severity and location.path/lines.begin, which merge
// requests show. Located on the Dockerfile line when --dockerfile mapped the finding, else on the
// path inside the image. Ignored findings are left out: the format has no suppressions.
#include <array>
#include <nlohmann/json.hpp>

#include "report/escape.h"
#include "report/report.h"
#include "util/names.h"

namespace imgcheck::report {

namespace {

constexpr auto kSeverities =
    std::to_array<util::EnumName<rules::Severity>>({{rules::Severity::kError, "critical"},
                                                    {rules::Severity::kWarning, "major"},
                                                    {rules::Severity::kInfo, "info"}});
static_assert(util::NamesEvery(kSeverities));

std::string_view Severity(rules::Severity s) { return util::Name(kSeverities, s, "critical"); }

}  // namespace

std::string RenderCodeQuality(const Report& report) {
  std::vector<const rules::Finding*> all;
  for (const auto& f : report.findings) all.push_back(&f);
  nlohmann::ordered_json issues = nlohmann::ordered_json::array();
  for (size_t i = 0; i < all.size(); ++i) {
    const rules::Finding& f = *all[i];
    std::string path;
    int line = 1;
    if (f.dockerfile) {
      path = f.dockerfile->path;
      line = f.dockerfile->line;
    } else {
      path = f.paths.empty() ? "/" : f.paths[0];
    }
    nlohmann::ordered_json issue;
    issue["description"] = f.rule + " " + f.name + ": " + f.message;
    issue["check_name"] = f.rule;
    issue["fingerprint"] = f.fingerprint;
    issue["severity"] = Severity(f.severity);
    issue["location"] = {{"path", path}, {"lines", {{"begin", line}}}};
    issues.push_back(std::move(issue));
  }
  return DumpJson(issues, 2) + "\n";
}

}  // namespace imgcheck::report

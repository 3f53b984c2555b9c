#include "report/diagnostics.h"

#include "report/escape.h"

namespace imgcheck::report {

std::string DiagnosticLine(const util::Diagnostic& d) {
  std::string where = Visible(d.path);
  if (d.layer >= 0) {
    std::string layer = "layer " + std::to_string(d.layer);
    where = where.empty() ? layer : where + " (" + layer + ")";
  }
  return where.empty() ? Visible(d.message) : where + ": " + Visible(d.message);
}

std::string DiagnosticsText(const std::vector<util::Diagnostic>& diagnostics) {
  if (diagnostics.empty()) return "";
  std::string out = "\n" + std::to_string(diagnostics.size()) +
                    (diagnostics.size() == 1 ? " diagnostic:\n" : " diagnostics:\n");
  for (const util::Diagnostic& d : diagnostics) out += "  " + DiagnosticLine(d) + "\n";
  return out;
}

nlohmann::ordered_json DiagnosticJson(const util::Diagnostic& d) {
  return {{"path", d.path}, {"layer", d.layer}, {"message", d.message}};
}

}  // namespace imgcheck::report

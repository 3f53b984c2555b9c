// The text report: findings grouped by severity, each with its place, evidence and fix, then
// one summary line.
#include <sstream>

#include "report/escape.h"
#include "report/report.h"

namespace imgcheck::report {

namespace {

const char* Colour(rules::Severity s) {
  switch (s) {
    case rules::Severity::kError:
      return "\033[1;31m";
    case rules::Severity::kWarning:
      return "\033[1;33m";
    case rules::Severity::kInfo:
      return "\033[1;36m";
  }
  return "";
}
constexpr const char* kReset = "\033[0m";
constexpr const char* kDim = "\033[2m";

std::string Plural(size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

}  // namespace

std::string RenderText(const Report& report, const RenderOptions& options) {
  std::ostringstream out;
  auto paint = [&](const char* code, const std::string& text) {
    return options.color ? std::string(code) + text + kReset : text;
  };
  out << "imgcheck " << Visible(report.image.reference);
  if (!report.image.manifest_digest.empty())
    out << " (" << Visible(report.image.manifest_digest) << ")";
  out << "\n";
  size_t counts[3] = {0, 0, 0};
  for (const auto& f : report.findings) ++counts[static_cast<int>(f.severity)];
  for (rules::Severity s :
       {rules::Severity::kError, rules::Severity::kWarning, rules::Severity::kInfo}) {
    size_t n = counts[static_cast<int>(s)];
    if (n == 0) continue;
    std::string heading = std::string(rules::SeverityName(s)) + (n == 1 ? "" : "s");
    heading[0] = static_cast<char>(heading[0] - 'a' + 'A');
    out << "\n" << paint(Colour(s), heading + " (" + std::to_string(n) + ")") << "\n";
    for (const auto& f : report.findings) {
      if (f.severity != s) continue;
      out << "\n  " << paint(Colour(s), Visible(f.rule)) << " " << Visible(f.name) << "\n";
      out << "    " << Visible(f.message) << "\n";
      for (const auto& p : f.paths) out << "    path: " << Visible(p) << "\n";
      if (f.layer.index >= 0) {
        out << "    layer " << f.layer.index;
        if (!f.layer.digest.empty()) out << " " << Visible(f.layer.digest.substr(0, 19));
        if (!f.layer.created_by.empty()) out << ": " << Visible(f.layer.created_by);
        out << "\n";
      }
      if (f.dockerfile) {
        std::string instruction = f.dockerfile->instruction;
        if (instruction.size() > 100) instruction = instruction.substr(0, 97) + "...";
        out << "    " << Visible(f.dockerfile->path) << ":" << f.dockerfile->line << " `"
            << Visible(instruction) << "`\n";
      }
      for (const auto& e : f.evidence)
        out << "    " << paint(kDim, Visible(e.label + ": " + EvidenceValue(e))) << "\n";
      if (!f.remediation.empty()) out << "    fix: " << Visible(f.remediation) << "\n";
    }
  }
  if (!report.diagnostics.empty()) {
    out << "\nUnreadable files (" << report.diagnostics.size() << ")\n";
    for (const auto& d : report.diagnostics)
      out << "  " << Visible(d.path)
          << (d.layer >= 0 ? " (layer " + std::to_string(d.layer) + ")" : "") << ": "
          << Visible(d.message) << "\n";
  }
  for (const auto& n : report.notes) out << "\nnote: " << Visible(n);
  if (!report.notes.empty()) out << "\n";
  out << "\n"
      << (report.findings.empty() ? std::string("no findings")
                                  : Plural(report.findings.size(), "finding", "findings") + ": " +
                                        Plural(counts[2], "error", "errors") + ", " +
                                        Plural(counts[1], "warning", "warnings") + ", " +
                                        std::to_string(counts[0]) + " info");
  if (!report.suppressed.empty())
    out << " (" << report.suppressed.size() << " suppressed by ignores)";
  // "No findings" in an image without CUDA means nothing was checked, not a clean stack.
  if (!report.cuda_stack) out << "; no CUDA stack found (no CUDA library, toolkit or framework)";
  out << "\n";
  return out.str();
}

}  // namespace imgcheck::report

// The text report, for people who read the first screen: one summary line (image, digest,
// counts by severity, the verdict of the exit code), then one block per finding, errors first:
// its message, where it is, the Dockerfile line and the fix. Evidence (search lists, version
// sources, layer digests) and quiet findings only with --verbose; `why` explains one soname.
#include <map>
#include <sstream>

#include "report/diagnostics.h"
#include "report/escape.h"
#include "report/report.h"
#include "rules/target.h"

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

// "sha256:" and the first 12 hex digits, as `docker images` shortens an ID.
std::string ShortDigest(const std::string& digest) {
  size_t colon = digest.find(':');
  return colon == std::string::npos ? digest : digest.substr(0, colon + 13);
}

// "error" padded to the width of "warning", so that rule IDs line up.
std::string SeverityWord(rules::Severity s) {
  std::string word(rules::SeverityName(s));
  return word + std::string(7 - word.size(), ' ');
}

}  // namespace

bool Shown(const rules::Finding& f, const RenderOptions& options) {
  return options.verbose || !f.quiet;
}

std::string Verdict(const Report& report) {
  size_t failing = 0;
  size_t baseline = 0;
  for (const auto& f : report.findings) {
    failing += Fails(report, f);
    baseline += f.baseline;
  }
  std::string gate = report.fail_on.at
                         ? "--fail-on " + std::string(rules::SeverityName(*report.fail_on.at))
                         : std::string("--fail-on none");
  std::string known = baseline ? ", " + std::to_string(baseline) + " in the baseline" : "";
  if (failing == 0) return "PASS (exit 0, " + gate + known + ")";
  std::string counted = report.baseline ? Plural(failing, "new finding", "new findings")
                                        : Plural(failing, "finding", "findings");
  return "FAIL (exit 1: " + counted + " at or above " + gate + known + ")";
}

std::string RenderText(const Report& report, const RenderOptions& options) {
  std::ostringstream out;
  auto paint = [&](const char* code, const std::string& text) {
    return options.color ? std::string(code) + text + kReset : text;
  };
  size_t counts[3] = {0, 0, 0};
  size_t quiet = 0;
  for (const auto& f : report.findings) {
    ++counts[static_cast<int>(f.severity)];
    quiet += f.quiet;
  }

  // 1. The summary line.
  out << "imgcheck " << Visible(report.image.reference);
  if (!report.image.manifest_digest.empty())
    out << " " << Visible(ShortDigest(report.image.manifest_digest));
  out << ": ";
  if (report.findings.empty()) {
    out << "no findings";
  } else {
    out << Plural(counts[2], "error", "errors") << ", " << Plural(counts[1], "warning", "warnings")
        << ", " << counts[0] << " info";
  }
  std::vector<std::string> aside;
  if (!report.suppressed.empty())
    aside.push_back(std::to_string(report.suppressed.size()) + " suppressed");
  if (quiet > 0 && !options.verbose) aside.push_back(std::to_string(quiet) + " quiet");
  for (size_t i = 0; i < aside.size(); ++i) out << (i ? ", " : " (") << aside[i];
  if (!aside.empty()) out << ")";
  out << "; " << Verdict(report) << "\n";
  // "No findings" in an image without CUDA means nothing was checked, not a clean stack.
  if (!report.cuda_stack) out << "no CUDA stack found (no CUDA library, toolkit or framework)\n";

  // 2. One block per finding, most severe first.
  for (rules::Severity s :
       {rules::Severity::kError, rules::Severity::kWarning, rules::Severity::kInfo}) {
    for (const auto& f : report.findings) {
      if (f.severity != s || !Shown(f, options)) continue;
      out << "\n"
          << paint(Colour(s), SeverityWord(s) + " " + Visible(f.rule)) << " " << Visible(f.name)
          << (f.quiet ? " (quiet)" : "") << (f.baseline ? " (in the baseline)" : "") << "\n";
      out << "  " << Visible(f.message) << "\n";
      if (f.layer.index >= 0) {
        out << "  layer " << f.layer.index;
        if (options.verbose && !f.layer.digest.empty())
          out << " " << Visible(ShortDigest(f.layer.digest));
        if (!f.layer.created_by.empty()) out << ": " << Visible(f.layer.created_by);
        out << "\n";
      }
      if (f.dockerfile) {
        std::string instruction = f.dockerfile->instruction;
        if (instruction.size() > 100) instruction = instruction.substr(0, 97) + "...";
        out << "  " << Visible(f.dockerfile->path) << ":" << f.dockerfile->line << ": "
            << Visible(instruction) << "\n";
      }
      if (options.verbose) {
        for (const auto& p : f.paths) out << "  " << paint(kDim, "path: " + Visible(p)) << "\n";
        for (const auto& e : f.evidence)
          out << "  " << paint(kDim, Visible(e.label + ": " + EvidenceValue(e))) << "\n";
      }
      if (!f.remediation.empty()) out << "  fix: " << Visible(f.remediation) << "\n";
    }
  }

  // 3. What could not be read or checked, each said once.
  out << DiagnosticsText(report.diagnostics);
  // Rules silent for lack of a target, one line per missing part, and only when the image has
  // a CUDA stack they would check; their long form stays in the notes of JSON.
  std::map<std::string, std::string> silent;  // reason -> rule IDs
  if (report.cuda_stack)
    for (const auto& n : report.not_run)
      if (n.for_target) silent[n.reason] += (silent[n.reason].empty() ? "" : ", ") + n.rule;
  std::vector<std::string> notes;
  notes.reserve(silent.size() + report.notes.size());
  for (const auto& [reason, ids] : silent) notes.push_back("not checked: " + ids + ": " + reason);
  for (const auto& n : report.notes)
    if (n.find(rules::kStaysSilent) == std::string::npos) notes.push_back(n);
  if (!notes.empty()) out << "\n";
  for (const auto& n : notes) out << "note: " << Visible(n) << "\n";
  if (!options.verbose && !report.findings.empty())
    out << "\n"
        << (quiet > 0 ? Plural(quiet, "quiet finding", "quiet findings") + " hidden; " : "")
        << "--verbose shows the evidence; `imgcheck why IMAGE SONAME` explains one library's "
           "search\n";
  return out.str();
}

}  // namespace imgcheck::report

// scan --format markdown: GitHub-flavoured Markdown for job summaries and pull-request comments
// (GitHub and GitLab render the ```mermaid blocks as flowcharts). The summary and the verdict
// first, then one section per severity; findings already in the baseline in their own section.
#include "report/markdown.h"

#include <array>
#include <cstring>

#include "report/escape.h"
#include "report/graph.h"
#include "report/report.h"
#include "rules/target.h"

namespace imgcheck::report {

std::string MarkdownText(std::string_view s) {
  std::string out;
  for (char c : Visible(s)) {
    if (c != '\0' && std::strchr("*_[]<>&|\\~$'\"`", c) != nullptr) {
      out += "&#" + std::to_string(static_cast<int>(c)) + ";";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

constexpr std::array<rules::Severity, 3> kOrder = {
    rules::Severity::kError, rules::Severity::kWarning, rules::Severity::kInfo};

std::string_view Heading(rules::Severity s) {
  switch (s) {
    case rules::Severity::kError:
      return "Errors";
    case rules::Severity::kWarning:
      return "Warnings";
    case rules::Severity::kInfo:
      return "Info";
  }
  return "Findings";
}

// The finding's main path's layer, for the files of its load chains.
LayerOf LayerOfFinding(const rules::Finding& f) {
  return [&f](std::string_view path) {
    return !f.paths.empty() && f.paths[0] == path ? f.layer : rules::LayerRef{};
  };
}

}  // namespace

std::string FindingMarkdown(const rules::Finding& f) {
  std::string out = "<details><summary><b>" + MarkdownText(f.rule) + "</b> " +
                    MarkdownText(f.name) + (f.baseline ? " (in the baseline)" : "") + ": " +
                    MarkdownText(f.message) + "</summary>\n\n";
  for (const std::string& p : f.paths) out += "- path: " + MarkdownText(p) + "\n";
  if (f.layer.index >= 0)
    out +=
        "- layer " + std::to_string(f.layer.index) + ": " + MarkdownText(f.layer.created_by) + "\n";
  if (f.dockerfile)
    out += "- " + MarkdownText(f.dockerfile->path) + ":" + std::to_string(f.dockerfile->line) +
           ": " + MarkdownText(f.dockerfile->instruction) + "\n";
  for (const rules::Evidence& e : f.evidence)
    out += "- " + MarkdownText(e.label) + ": " + MarkdownText(EvidenceValue(e)) + "\n";
  if (!f.remediation.empty()) out += "- **fix:** " + MarkdownText(f.remediation) + "\n";
  // One flowchart per loader finding: its first resolution, the one its message is about.
  for (const rules::Evidence& e : f.evidence)
    if (e.resolution) {
      out += "\n```mermaid\n" + MermaidChain(*e.resolution, LayerOfFinding(f)) + "```\n";
      break;
    }
  return out + "\n</details>\n\n";
}

std::string SeveritySections(const std::vector<const rules::Finding*>& findings, int level) {
  std::string out;
  for (rules::Severity s : kOrder) {
    std::string section;
    size_t n = 0;
    for (const rules::Finding* f : findings)
      if (f->severity == s) {
        section += FindingMarkdown(*f);
        ++n;
      }
    if (n > 0)
      out += std::string(static_cast<size_t>(level), '#') + " " + std::string(Heading(s)) + " (" +
             std::to_string(n) + ")\n\n" + section;
  }
  return out;
}

std::string RenderMarkdown(const Report& report) {
  size_t counts[3] = {0, 0, 0};
  std::vector<const rules::Finding*> current, known;
  for (const rules::Finding& f : report.findings) {
    ++counts[static_cast<int>(f.severity)];
    (f.baseline ? known : current).push_back(&f);
  }
  std::string out = "## imgcheck: " + MarkdownText(report.image.reference) + "\n\n";
  out += "**" + MarkdownText(Verdict(report)) + "**\n\n";
  out +=
      "| errors | warnings | info | in the baseline | suppressed |\n|---:|---:|---:|---:|---:|\n";
  out += "| " + std::to_string(counts[2]) + " | " + std::to_string(counts[1]) + " | " +
         std::to_string(counts[0]) + " | " + std::to_string(known.size()) + " | " +
         std::to_string(report.suppressed.size()) + " |\n\n";
  if (!report.image.manifest_digest.empty())
    out += "manifest " + MarkdownText(report.image.manifest_digest) + "\n\n";
  if (!report.cuda_stack) out += "No CUDA stack found (no CUDA library, toolkit or framework).\n\n";
  out += SeveritySections(current, 3);
  if (!known.empty())
    out += "### In the baseline (" + std::to_string(known.size()) + ")\n\n" +
           SeveritySections(known, 4);
  for (const std::string& n : report.notes)
    if (n.find(rules::kStaysSilent) == std::string::npos)
      out += "> note: " + MarkdownText(n) + "\n>\n";
  return out;
}

}  // namespace imgcheck::report

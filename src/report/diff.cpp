// imgcheck diff's three forms: text for people, imgcheck-diff/1 JSON for tools, and Markdown
// for pull-request comments. Each shows the same model in the same order: frameworks, CUDA
// libraries by package, loads that resolve differently, then findings new, fixed, unchanged.
#include "report/diff.h"

#include <sstream>

#include "report/escape.h"
#include "report/image_header.h"
#include "report/json.h"
#include "report/markdown.h"
#include "util/names.h"

namespace imgcheck::report {

namespace {

constexpr auto kChanges =
    std::to_array<util::EnumName<Change>>({{Change::kAdded, "added"},
                                           {Change::kRemoved, "removed"},
                                           {Change::kUpgraded, "upgraded"},
                                           {Change::kDowngraded, "downgraded"},
                                           {Change::kChanged, "changed"}});
static_assert(util::NamesEvery(kChanges));

// "" (absent) shown as a dash.
std::string Or(const std::string& s) { return s.empty() ? "-" : s; }

struct Split {
  std::vector<const rules::Finding*> added, unchanged, fixed;
};

Split SplitFindings(const Diff& d) {
  Split s;
  for (const rules::Finding& f : d.report.findings)
    (f.baseline ? s.unchanged : s.added).push_back(&f);
  for (const rules::Finding& f : d.fixed) s.fixed.push_back(&f);
  return s;
}

std::string Counts(const Split& s) {
  return std::to_string(s.added.size()) + " new, " + std::to_string(s.fixed.size()) + " fixed, " +
         std::to_string(s.unchanged.size()) + " unchanged";
}

void TextFindings(std::ostringstream& out, const char* title,
                  const std::vector<const rules::Finding*>& list) {
  if (list.empty()) return;
  out << "\n" << title << " findings:\n";
  for (const rules::Finding* f : list)
    out << "  " << SeverityName(f->severity) << " " << Visible(f->rule) << " " << Visible(f->name)
        << ": " << Visible(f->message) << "\n";
}

}  // namespace

std::string_view ChangeName(Change change) { return util::Name(kChanges, change, "changed"); }

std::string RenderDiff(const Diff& diff, DiffFormat format, const RenderOptions& options) {
  switch (format) {
    case DiffFormat::kText:
      return RenderDiffText(diff, options);
    case DiffFormat::kJson:
      return RenderDiffJson(diff);
    case DiffFormat::kMarkdown:
      return RenderDiffMarkdown(diff);
  }
  return RenderDiffText(diff, options);
}

std::string RenderDiffText(const Diff& diff, const RenderOptions& /*options*/) {
  std::ostringstream out;
  Split s = SplitFindings(diff);
  out << "imgcheck diff " << Visible(diff.old_image.reference) << " -> "
      << Visible(diff.report.image.reference) << ": findings " << Counts(s) << "; "
      << Verdict(diff.report) << "\n";
  if (!diff.frameworks.empty()) out << "\nframeworks:\n";
  for (const FrameworkChange& c : diff.frameworks)
    out << "  " << ChangeName(c.change) << " " << Visible(c.name) << ": "
        << Visible(Or(c.old_build)) << " -> " << Visible(Or(c.new_build)) << "\n";
  out << "\nCUDA libraries: " << diff.libraries.size() << " changed, " << diff.libraries_unchanged
      << " unchanged\n";
  for (const LibraryChange& c : diff.libraries)
    out << "  " << ChangeName(c.change) << " " << Visible(c.library) << " (" << Visible(c.package)
        << "): " << Visible(Or(c.old_version)) << " -> " << Visible(Or(c.new_version)) << "\n";
  if (!diff.loads.empty()) out << "\nloads that resolve differently:\n";
  for (const LoadChange& l : diff.loads)
    out << "  " << Visible(l.consumer) << " asks " << Visible(l.name) << ": "
        << Visible(Or(l.old_file)) << " -> " << Visible(Or(l.new_file)) << " (" << Visible(l.why)
        << ")\n";
  TextFindings(out, "new", s.added);
  TextFindings(out, "fixed", s.fixed);
  TextFindings(out, "unchanged", s.unchanged);
  return out.str();
}

std::string RenderDiffJson(const Diff& diff) {
  nlohmann::ordered_json j;
  j["schema"] = "imgcheck-diff/1";
  j["tool"] = {{"name", "imgcheck"},
               {"version", diff.report.tool_version},
               {"rules_version", diff.report.rules_version}};
  j["old_image"] = ImageJson(diff.old_image);
  j["new_image"] = ImageJson(diff.report.image);
  j["frameworks"] = nlohmann::ordered_json::array();
  for (const FrameworkChange& c : diff.frameworks)
    j["frameworks"].push_back({{"name", c.name},
                               {"change", ChangeName(c.change)},
                               {"old", c.old_build},
                               {"new", c.new_build}});
  j["libraries"] = nlohmann::ordered_json::array();
  for (const LibraryChange& c : diff.libraries)
    j["libraries"].push_back({{"package", c.package},
                              {"library", c.library},
                              {"change", ChangeName(c.change)},
                              {"old", c.old_version},
                              {"new", c.new_version}});
  j["libraries_unchanged"] = diff.libraries_unchanged;
  j["loads"] = nlohmann::ordered_json::array();
  for (const LoadChange& l : diff.loads)
    j["loads"].push_back({{"consumer", l.consumer},
                          {"name", l.name},
                          {"old", l.old_file},
                          {"new", l.new_file},
                          {"why", l.why}});
  Split s = SplitFindings(diff);
  auto list = [&](const std::vector<const rules::Finding*>& v) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const rules::Finding* f : v) a.push_back(FindingJson(*f, diff.report.dockerfile));
    return a;
  };
  j["findings"] = {
      {"new", list(s.added)}, {"fixed", list(s.fixed)}, {"unchanged", list(s.unchanged)}};
  j["verdict"] = Verdict(diff.report);
  return DumpJson(j, 2) + "\n";
}

std::string RenderDiffMarkdown(const Diff& diff) {
  Split s = SplitFindings(diff);
  std::string out = "## imgcheck diff: " + MarkdownText(diff.old_image.reference) + " &#8594; " +
                    MarkdownText(diff.report.image.reference) + "\n\n**" +
                    MarkdownText(Verdict(diff.report)) + "**: findings " + Counts(s) + "\n\n";
  if (!diff.frameworks.empty()) {
    out += "### Frameworks\n\n| framework | change | old | new |\n|---|---|---|---|\n";
    for (const FrameworkChange& c : diff.frameworks)
      out += "| " + MarkdownText(c.name) + " | " + std::string(ChangeName(c.change)) + " | " +
             MarkdownText(Or(c.old_build)) + " | " + MarkdownText(Or(c.new_build)) + " |\n";
    out += "\n";
  }
  out += "### CUDA libraries\n\n" + std::to_string(diff.libraries.size()) + " changed, " +
         std::to_string(diff.libraries_unchanged) + " unchanged.\n\n";
  if (!diff.libraries.empty()) {
    out += "| package | library | change | old | new |\n|---|---|---|---|---|\n";
    for (const LibraryChange& c : diff.libraries)
      out += "| " + MarkdownText(c.package) + " | " + MarkdownText(c.library) + " | " +
             std::string(ChangeName(c.change)) + " | " + MarkdownText(Or(c.old_version)) + " | " +
             MarkdownText(Or(c.new_version)) + " |\n";
    out += "\n";
  }
  if (!diff.loads.empty()) {
    out +=
        "### Loads that resolve differently\n\n| consumer | name | old | new | why |\n"
        "|---|---|---|---|---|\n";
    for (const LoadChange& l : diff.loads)
      out += "| " + MarkdownText(l.consumer) + " | " + MarkdownText(l.name) + " | " +
             MarkdownText(Or(l.old_file)) + " | " + MarkdownText(Or(l.new_file)) + " | " +
             MarkdownText(l.why) + " |\n";
    out += "\n";
  }
  out += "### New findings (" + std::to_string(s.added.size()) + ")\n\n" +
         SeveritySections(s.added, 4);
  out += "### Fixed findings (" + std::to_string(s.fixed.size()) + ")\n\n" +
         SeveritySections(s.fixed, 4);
  out += "### Unchanged findings (" + std::to_string(s.unchanged.size()) + ")\n\n" +
         SeveritySections(s.unchanged, 4);
  return out;
}

}  // namespace imgcheck::report

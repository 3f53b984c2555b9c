// JUnit XML: one test case per rule of the table. It agrees with the exit code: a rule fails
// (one <failure> listing them) only with findings at or above --fail-on; the others go to the
// suite's <system-out>; a rule that could not run (no target, no probe) is <skipped> with the
// reason. Valid against the Jenkins and the Ant (JUnit 5) schemas of testdata/junit.
#include <algorithm>
#include <sstream>

#include "report/escape.h"
#include "report/report.h"

namespace imgcheck::report {

namespace {

// Text for an XML attribute or element: Visible() leaves no control character and no invalid
// UTF-8 (XML 1.0 can hold neither, not even as character references) and escapes them so that
// the bytes can be recovered; then the five markup characters as entities, and tab as a
// reference, which attribute-value normalisation would otherwise turn into a space.
std::string Xml(std::string_view raw) {
  std::string out;
  for (char c : Visible(raw)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '\t':
        out += "&#9;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string RenderJunit(const Report& report) {
  struct Case {
    std::string id, name;
    std::vector<const rules::Finding*> failures, infos;
    std::string skipped;  ///< why the rule could not run
  };
  std::vector<Case> cases;
  if (report.knowledge)
    for (const auto& r : report.knowledge->rules()) cases.push_back({r.id, r.name, {}, {}, {}});
  auto find = [&](const std::string& id) {
    return std::find_if(cases.begin(), cases.end(), [&](const Case& c) { return c.id == id; });
  };
  for (const auto& f : report.findings) {
    auto it = find(f.rule);
    if (it == cases.end()) it = cases.insert(cases.end(), Case{f.rule, f.name, {}, {}, {}});
    (Fails(report, f) ? it->failures : it->infos).push_back(&f);
  }
  for (const auto& n : report.not_run)
    if (auto it = find(n.rule); it != cases.end() && it->failures.empty() && it->infos.empty())
      it->skipped = n.reason;
  size_t failed = 0, skipped = 0;
  for (const auto& c : cases) {
    failed += !c.failures.empty();
    skipped += !c.skipped.empty();
  }
  // The shape both schemas accept (testdata/junit): the Ant schema JUnit 5 follows allows no
  // attribute on <testsuites>, wants package, id, timestamp (no zone), hostname and time on the
  // suite, and at most one child per test case; findings that do not fail go to the suite's
  // <system-out>.
  std::ostringstream out;
  std::string suite = "imgcheck " + report.image.reference;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites>\n";
  out << "  <testsuite name=\"" << Xml(suite) << "\" package=\"imgcheck\" id=\"0\" timestamp=\""
      << Xml(report.timestamp.empty() ? "1970-01-01T00:00:00" : report.timestamp)
      << "\" hostname=\"localhost\" tests=\"" << cases.size() << "\" failures=\"" << failed
      << "\" errors=\"0\" skipped=\"" << skipped << "\" time=\"0\">\n";
  out << "    <properties>\n";
  auto property = [&](const std::string& name, const std::string& value) {
    if (!value.empty())
      out << "      <property name=\"" << name << "\" value=\"" << Xml(value) << "\"/>\n";
  };
  property("image", report.image.reference);
  property("manifest-digest", report.image.manifest_digest);
  property("platform", report.image.platform);
  property("fail-on", report.fail_on.at ? std::string(rules::SeverityName(*report.fail_on.at))
                                        : std::string("none"));
  property("imgcheck-version", report.tool_version);
  out << "    </properties>\n";
  for (const auto& c : cases) {
    out << "    <testcase classname=\"imgcheck." << Xml(c.id) << "\" name=\""
        << Xml(c.id + " " + c.name) << "\" time=\"0\"";
    if (c.failures.empty() && c.skipped.empty()) {
      out << "/>\n";
      continue;
    }
    out << ">\n";
    if (!c.failures.empty()) {
      const auto* first = c.failures[0];
      out << "      <failure type=\"" << rules::SeverityName(first->severity) << "\" message=\""
          << Xml(std::to_string(c.failures.size()) + " finding(s): " + first->message) << "\">";
      for (const auto* f : c.failures) {
        out << Xml("[" + std::string(rules::SeverityName(f->severity)) + "] " + f->message) << "\n";
        for (const auto& p : f->paths) out << Xml("  path: " + p) << "\n";
        if (f->dockerfile)
          out << Xml("  " + f->dockerfile->path + ":" + std::to_string(f->dockerfile->line) + ": " +
                     f->dockerfile->instruction)
              << "\n";
        if (!f->remediation.empty()) out << Xml("  fix: " + f->remediation) << "\n";
      }
      out << "</failure>\n";
    } else {
      out << "      <skipped message=\"" << Xml(c.skipped) << "\"/>\n";
    }
    out << "    </testcase>\n";
  }
  out << "    <system-out>";
  for (const auto& c : cases)
    for (const auto* f : c.infos)
      out << Xml("[" + std::string(rules::SeverityName(f->severity)) + "] " + f->rule + " " +
                 f->message)
          << "\n";
  out << "</system-out>\n";
  out << "    <system-err/>\n";
  out << "  </testsuite>\n</testsuites>\n";
  return out.str();
}

}  // namespace imgcheck::report

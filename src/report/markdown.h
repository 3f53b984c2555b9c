// The pieces GitHub-flavoured Markdown reports share (scan --format markdown, diff).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rules/finding.h"

namespace imgcheck::report {

/// Text for Markdown and the HTML inside it: Visible, then every character Markdown or HTML
/// could read (`*_[]<>&|\~$'"` and the backtick) as a numeric character reference, so a name
/// from the image stays text, also in a table cell or a <summary>. ('#' and '!' stay: no line of
/// ours starts with the text, and '!' needs the '[' that is escaped; a URL keeps its fragment.)
std::string MarkdownText(std::string_view s);

/// One finding: a <details> whose summary is its severity, rule, name and message, folding its
/// paths, layer, Dockerfile line, evidence and fix, and, for a loader finding (evidence with a
/// resolution), one ```mermaid flowchart of its first resolution.
std::string FindingMarkdown(const rules::Finding& f);

/// `findings` in one section per severity, errors first ("### Errors (2)" at `level` '#'s),
/// none for a severity without findings.
std::string SeveritySections(const std::vector<const rules::Finding*>& findings, int level);

}  // namespace imgcheck::report

// Diagnostics (what could not be read or checked) as every document of the report stage shows
// them: one line for people, one object for JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/error.h"

namespace imgcheck::report {

/// "/usr/lib/libbad.so (layer 0): corrupt ELF: truncated"; the path or the layer left out when
/// the diagnostic has none ("layer 2: ...", "/etc/ld.so.conf: ...", or the message alone).
/// Visible: safe for a terminal.
std::string DiagnosticLine(const util::Diagnostic& d);

/// The text block closing a report: a blank line, "1 diagnostic:" or "N diagnostics:", then one
/// indented DiagnosticLine each; "" when there are none.
std::string DiagnosticsText(const std::vector<util::Diagnostic>& diagnostics);

/// {"path", "layer", "message"}, in that order (layer -1: not tied to one layer).
nlohmann::ordered_json DiagnosticJson(const util::Diagnostic& d);

}  // namespace imgcheck::report

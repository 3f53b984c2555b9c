// Names from an image are bytes, not text: a file name may hold invalid UTF-8 (0xE9 from a
// Latin-1 tool) or control characters (ESC). Every renderer writes them through one of these.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace imgcheck::report {

/// For people (text, tables, XML, stderr): `s` as is when it is valid UTF-8 without control
/// characters; otherwise each byte of an invalid sequence and of each control character (C0 but
/// tab, DEL, C1) as the four characters "\xHH" and each backslash as "\\", so a name can neither
/// break the output's encoding nor drive a terminal, and its bytes can be recovered. The result
/// is clean, so Visible(Visible(s)) == Visible(s).
std::string Visible(std::string_view s);

/// A rendered text made safe for a terminal: Visible line by line, its own newlines kept. The
/// last pass of every plain-text renderer.
std::string VisibleLines(std::string_view text);

/// A message for one line of stderr: trailing whitespace dropped, then Visible (so a newline
/// inside shows as "\x0A" and the message stays one line).
std::string LogLine(std::string_view message);

/// For JSON: valid UTF-8 unchanged (control characters are JSON's to escape); otherwise each
/// byte of an invalid sequence as "\xHH" and each backslash as "\\", so the bytes can be
/// recovered (rules/README.md, "Names that are not UTF-8").
std::string JsonText(std::string_view s);

/// Every string of `j`, keys too, replaced by `f(string)` (for json and ordered_json alike).
template <typename Json, typename F>
void TransformStrings(Json& j, const F& f) {
  if (j.is_string()) {
    j = f(j.template get_ref<const std::string&>());
  } else if (j.is_array()) {
    for (auto& e : j) TransformStrings(e, f);
  } else if (j.is_object()) {
    Json out = Json::object();
    for (auto& [key, value] : j.items()) {
      TransformStrings(value, f);
      out[f(key)] = std::move(value);
    }
    j = std::move(out);
  }
}

/// `j` dumped with `indent`, every string in it (keys too) passed through JsonText first: the
/// dump never throws on a name that is not UTF-8. DEL and C1 controls are written as \u escapes,
/// so no raw control character reaches a terminal that shows the JSON.
std::string DumpJson(const nlohmann::ordered_json& j, int indent);
std::string DumpJson(const nlohmann::json& j, int indent);

}  // namespace imgcheck::report

// Names from an image are bytes, not text: a file name may hold invalid UTF-8 (0xE9 from a
// Latin-1 tool) or control characters (ESC). Every renderer writes them through one of these.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace imgcheck::report {

/// For people (text, tables, XML): valid UTF-8 as is, but each byte of an invalid sequence and
/// each control character (C0 but tab, DEL, C1) as the four characters "\xHH", so a name can
/// neither break the output's encoding nor drive a terminal.
std::string Visible(std::string_view s);

/// For JSON: valid UTF-8 unchanged (control characters are JSON's to escape); otherwise each
/// byte of an invalid sequence as "\xHH" and each backslash as "\\", so the bytes can be
/// recovered (rules/README.md, "Names that are not UTF-8").
std::string JsonText(std::string_view s);

/// `j` dumped with `indent`, every string in it (keys too) passed through JsonText first: the
/// dump never throws on a name that is not UTF-8.
std::string DumpJson(const nlohmann::ordered_json& j, int indent);
std::string DumpJson(const nlohmann::json& j, int indent);

}  // namespace imgcheck::report

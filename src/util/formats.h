// Output formats: each command's one table of {value, name, summary}, which its --format
// option, help, check, shell completion and parse all read.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace imgcheck::util {

template <class F>
struct FormatInfo {
  F format;
  std::string_view name;
  std::string_view summary;
};

/// The format `table` names `name`; nullopt for any other name.
template <class Table>
auto ParseFormat(const Table& table, std::string_view name)
    -> std::optional<decltype(table.begin()->format)> {
  for (const auto& f : table)
    if (f.name == name) return f.format;
  return std::nullopt;
}

/// "text|json|sarif".
template <class Table>
std::string FormatNames(const Table& table) {
  std::string out;
  for (const auto& f : table) out += (out.empty() ? "" : "|") + std::string(f.name);
  return out;
}

/// "output format: text (for people), json (for tools)" (`what`: "output format").
template <class Table>
std::string FormatHelp(const Table& table, std::string_view what = "output format") {
  std::string out = std::string(what) + ":";
  for (const auto& f : table)
    out += (out.back() == ':' ? " " : ", ") + std::string(f.name) + " (" + std::string(f.summary) +
           ")";
  return out;
}

/// "" when `table` names `name`, else "unknown format 'xml' (text|json)".
template <class Table>
std::string UnknownFormat(const Table& table, std::string_view name) {
  if (ParseFormat(table, name)) return "";
  return "unknown format '" + std::string(name) + "' (" + FormatNames(table) + ")";
}

}  // namespace imgcheck::util

// Rule data files (rules/*.json): parsed JSON plus the line of every value, so that a
// malformed or inconsistent file is reported as `file:line: message`. Read once by the CLI and
// typed by each stage that consults them (catalog::LibraryRules, rules::Knowledge).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace imgcheck::util {

struct DataFile {
  std::string path;  ///< as read (for messages)
  std::string name;  ///< file name ("cuda.json"): a later file of the same name replaces it
  nlohmann::json json;
  /// JSON pointer ("/rules/3/id") -> line, as a reader that knows them fills it (the YAML
  /// config). Empty for a JSON file: Line() indexes `text` when a message needs a line.
  std::map<std::string, int, std::less<>> lines;
  std::string text;  ///< the JSON text as read; empty for YAML

  /// Line of the value at `pointer`, or of its nearest enclosing value; 1 when unknown.
  int Line(std::string_view pointer) const;
  /// "path:line: message" for the value at `pointer`.
  std::string Where(std::string_view pointer, std::string_view message) const;
};

/// Parses rules file `text`; the error is "path:line: message" for malformed JSON.
Expected<DataFile> ParseDataFile(std::string path, std::string_view text);

/// Reads every *.json of each directory, in order (names sorted within a directory); a file
/// in a later directory replaces an earlier one of the same name. Fatal ("file:line:
/// message") for unreadable or malformed files, or a directory that does not exist.
std::vector<DataFile> LoadDataFiles(const std::vector<std::string>& dirs);

/// One row of a table: `file.json[pointer]` is the row object.
struct Row {
  const DataFile* file = nullptr;
  std::string pointer;
  const nlohmann::json* value = nullptr;

  /// Typed field access; Fatal("file:line: ...") when missing (required) or mistyped.
  std::string String(std::string_view key, bool required = true) const;
  int Int(std::string_view key, bool required = true, int fallback = 0) const;
  bool Bool(std::string_view key, bool fallback) const;
  std::vector<std::string> Strings(std::string_view key, bool required = true) const;
  std::vector<int> Ints(std::string_view key, bool required = true) const;
  bool Has(std::string_view key) const;
  /// Throws Fatal naming this row's (or its field's) line.
  [[noreturn]] void Fail(std::string_view key, std::string_view message) const;
};

/// The rows of table `table` (a top-level key whose value is {"rows": [...]}) across `files`,
/// later files first (so their rows win lookups). Every row must be an object with a
/// non-empty string `source` (Fatal otherwise). Empty when no file has the table.
std::vector<Row> TableRows(const std::vector<DataFile>& files, std::string_view table);

}  // namespace imgcheck::util

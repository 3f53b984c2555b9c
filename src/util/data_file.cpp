#include "util/data_file.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <optional>

#include "util/file.h"
#include "util/parallel.h"

namespace imgcheck::util {

namespace {

std::string EscapePointerToken(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// Records the line of every value of valid JSON `text` by JSON pointer. Runs after a successful
// parse, so it only has to follow structure, not validate it.
void IndexLines(std::string_view text, std::map<std::string, int, std::less<>>& out) {
  struct Frame {
    bool object;
    int index;
    std::string base;
    std::string key;
    bool expect_key;
  };
  std::vector<Frame> stack;
  int line = 1;
  auto value_pointer = [&]() -> std::string {
    if (stack.empty()) return "";
    const Frame& f = stack.back();
    return f.base + "/" + (f.object ? EscapePointerToken(f.key) : std::to_string(f.index));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == ':') {
    } else if (c == '"') {
      std::string s;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;  // keys with escapes keep the raw char
        s += text[i];
      }
      if (!stack.empty() && stack.back().object && stack.back().expect_key) {
        stack.back().key = std::move(s);
        stack.back().expect_key = false;
      } else {
        out.emplace(value_pointer(), line);
      }
    } else if (c == '{' || c == '[') {
      std::string p = value_pointer();
      out.emplace(p, line);
      stack.push_back({c == '{', 0, std::move(p), "", c == '{'});
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',') {
      if (!stack.empty()) {
        if (stack.back().object)
          stack.back().expect_key = true;
        else
          ++stack.back().index;
      }
    } else {  // number, true, false, null
      out.emplace(value_pointer(), line);
      while (i + 1 < text.size() &&
             std::string_view(",}] \t\r\n").find(text[i + 1]) == std::string_view::npos)
        ++i;
    }
  }
}

// nlohmann's message without its "[json.exception...] parse error at line L, column C: " lead.
std::string ParseMessage(const std::string& what) {
  size_t at = what.find(", column ");
  if (at != std::string::npos) {
    size_t colon = what.find(": ", at);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  size_t bracket = what.find("] ");
  return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

}  // namespace

int DataFile::Line(std::string_view pointer) const {
  // Only messages need lines: a JSON file is indexed here, not on every load (a scan reads
  // 284 KB of rules/ and reports no line of it).
  std::map<std::string, int, std::less<>> indexed;
  if (lines.empty()) IndexLines(text, indexed);
  const auto& index = lines.empty() ? indexed : lines;
  std::string p(pointer);
  while (true) {
    if (auto it = index.find(p); it != index.end()) return it->second;
    if (p.empty()) return 1;
    p.erase(p.rfind('/'));
  }
}

std::string DataFile::Where(std::string_view pointer, std::string_view message) const {
  return path + ":" + std::to_string(Line(pointer)) + ": " + std::string(message);
}

Expected<DataFile> ParseDataFile(std::string path, std::string_view text) {
  DataFile f;
  f.name = std::filesystem::path(path).filename().string();
  f.path = std::move(path);
  try {
    f.json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset of the character the parser stopped at.
    size_t end = std::min(text.size(), e.byte == 0 ? 0 : e.byte - 1);
    int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + end, '\n'));
    return MakeError(f.path + ":" + std::to_string(line) + ": " + ParseMessage(e.what()));
  }
  if (!f.json.is_object()) return MakeError(f.path + ":1: a rules file must be a JSON object");
  f.text = text;
  return f;
}

std::vector<DataFile> LoadDataFiles(const std::vector<std::string>& dirs) {
  std::vector<std::pair<std::string, std::string>> texts;  // path, text; in the order read
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      throw Fatal("rules directory " + dir + " does not exist");
    std::vector<std::filesystem::path> paths;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (entry.path().extension() == ".json") paths.push_back(entry.path());
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
      util::Expected<std::string> text = util::ReadFile(p);
      if (!text) throw util::Fatal(p.string() + ":1: cannot read the file");
      texts.emplace_back(p.string(), std::move(*text));
    }
  }
  // Parsing is most of a warm scan's rules load: two threads take the files, largest first.
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return texts[a].second.size() > texts[b].second.size(); });
  std::vector<std::optional<Expected<DataFile>>> parsed(texts.size());
  ParallelFor(order.size(), 2, [&](size_t i) {
    parsed[order[i]].emplace(ParseDataFile(texts[order[i]].first, texts[order[i]].second));
  });
  std::vector<DataFile> files;
  for (auto& result : parsed) {
    if (!*result) throw util::Fatal(result->error().message);
    auto same = std::find_if(files.begin(), files.end(),
                             [&](const DataFile& f) { return f.name == (*result)->name; });
    if (same != files.end())
      *same = std::move(**result);
    else
      files.push_back(std::move(**result));
  }
  return files;
}

void Row::Fail(std::string_view key, std::string_view message) const {
  std::string at = key.empty() ? pointer : pointer + "/" + EscapePointerToken(key);
  throw Fatal(file->Where(at, message));
}

bool Row::Has(std::string_view key) const {
  return value->contains(std::string(key)) && !(*value)[std::string(key)].is_null();
}

std::string Row::String(std::string_view key, bool required) const {
  std::string k(key);
  if (!Has(key)) {
    if (required) Fail("", "missing field \"" + k + "\"");
    return "";
  }
  const auto& v = (*value)[k];
  if (!v.is_string()) Fail(key, "field \"" + k + "\" must be a string");
  return v.get<std::string>();
}

int Row::Int(std::string_view key, bool required, int fallback) const {
  std::string k(key);
  if (!Has(key)) {
    if (required) Fail("", "missing field \"" + k + "\"");
    return fallback;
  }
  const auto& v = (*value)[k];
  if (!v.is_number_integer()) Fail(key, "field \"" + k + "\" must be an integer");
  return v.get<int>();
}

bool Row::Bool(std::string_view key, bool fallback) const {
  std::string k(key);
  if (!Has(key)) return fallback;
  const auto& v = (*value)[k];
  if (!v.is_boolean()) Fail(key, "field \"" + k + "\" must be true or false");
  return v.get<bool>();
}

std::vector<std::string> Row::Strings(std::string_view key, bool required) const {
  std::string k(key);
  std::vector<std::string> out;
  if (!Has(key)) {
    if (required) Fail("", "missing field \"" + k + "\"");
    return out;
  }
  const auto& v = (*value)[k];
  if (!v.is_array()) Fail(key, "field \"" + k + "\" must be a list of strings");
  for (const auto& e : v) {
    if (!e.is_string()) Fail(key, "field \"" + k + "\" must be a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<int> Row::Ints(std::string_view key, bool required) const {
  std::string k(key);
  std::vector<int> out;
  if (!Has(key)) {
    if (required) Fail("", "missing field \"" + k + "\"");
    return out;
  }
  const auto& v = (*value)[k];
  if (!v.is_array()) Fail(key, "field \"" + k + "\" must be a list of integers");
  for (const auto& e : v) {
    if (!e.is_number_integer()) Fail(key, "field \"" + k + "\" must be a list of integers");
    out.push_back(e.get<int>());
  }
  return out;
}

std::vector<Row> TableRows(const std::vector<DataFile>& files, std::string_view table) {
  std::vector<Row> rows;
  std::string key(table);
  for (auto f = files.rbegin(); f != files.rend(); ++f) {
    if (!f->json.contains(key)) continue;
    const auto& t = f->json[key];
    std::string base = "/" + EscapePointerToken(key);
    if (!t.is_object() || !t.contains("rows") || !t["rows"].is_array())
      throw Fatal(f->Where(base, "table \"" + key + "\" must be an object with a \"rows\" list"));
    const auto& list = t["rows"];
    for (size_t i = 0; i < list.size(); ++i) {
      Row row{&*f, base + "/rows/" + std::to_string(i), &list[i]};
      if (!list[i].is_object()) row.Fail("", "a row of \"" + key + "\" must be an object");
      if (row.String("source", false).empty())
        row.Fail("", "row has no \"source\": every fact must say where it comes from");
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace imgcheck::util

#include "rules/config.h"

#include <filesystem>

#include "util/path.h"
#include "util/text.h"

namespace imgcheck::rules {

namespace {

// A YAML scalar: quoted ("..." with \" and \\, or '...' with '') or plain up to a " #" comment.
util::Expected<std::string> Scalar(std::string_view raw) {
  std::string s(util::Trim(raw));
  if (!s.empty() && (s[0] == '"' || s[0] == '\'')) {
    char q = s[0];
    std::string out;
    size_t i = 1;
    for (; i < s.size(); ++i) {
      // "\x" in double quotes and '' in single quotes: the next character is literal.
      bool escaped = i + 1 < s.size() && ((q == '"' && s[i] == '\\') ||
                                          (q == '\'' && s[i] == '\'' && s[i + 1] == '\''));
      if (escaped) {
        out += s[++i];
      } else if (s[i] == q) {
        break;
      } else {
        out += s[i];
      }
    }
    if (i >= s.size()) return util::MakeError("unterminated quoted string");
    std::string rest(util::Trim(std::string_view(s).substr(i + 1)));
    if (!rest.empty() && rest[0] != '#') return util::MakeError("text after a quoted string");
    return out;
  }
  if (size_t hash = s.find(" #"); hash != std::string::npos)
    s = std::string(util::Trim(std::string_view(s).substr(0, hash)));
  if (!s.empty() && s[0] == '#') return std::string();
  return s;
}

// The YAML subset: top-level `key: scalar`, `key:` + an indented mapping of `key: scalar`, or
// `key:` + an indented list of `- key: scalar` items (continued by deeper `key: scalar` lines).
// Becomes the same JSON a .json config holds, with the line of every value for messages.
util::Expected<DataFile> ParseYaml(const std::string& path, std::string_view text) {
  DataFile f;
  f.path = path;
  f.name = std::filesystem::path(path).filename().string();
  f.json = nlohmann::json::object();
  auto fail = [&](int line, const std::string& m) {
    return util::MakeError(path + ":" + std::to_string(line) + ": " + m);
  };
  std::string top;  // current top-level key with a block value
  int item = -1;    // index of the current list item
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    std::string trimmed(util::Trim(line));
    if (trimmed.empty() || trimmed[0] == '#' || trimmed == "---") continue;
    if (line.find('\t') < line.find_first_not_of(" \t"))
      return fail(line_no, "tabs are not allowed for indentation");
    size_t indent = line.find_first_not_of(' ');
    bool dash = trimmed[0] == '-' && (trimmed.size() == 1 || trimmed[1] == ' ');
    std::string body(dash ? util::Trim(std::string_view(trimmed).substr(1)) : trimmed);
    size_t colon = body.find(':');
    if (colon == std::string::npos || (colon + 1 < body.size() && body[colon + 1] != ' '))
      return fail(line_no, "expected \"key: value\"");
    std::string key(util::Trim(std::string_view(body).substr(0, colon)));
    auto value = Scalar(std::string_view(body).substr(colon + 1));
    if (!value) return fail(line_no, value.error().message);
    if (key.empty()) return fail(line_no, "empty key");
    if (indent == 0 && !dash) {
      if (f.json.contains(key)) return fail(line_no, "\"" + key + "\" appears twice");
      item = -1;
      if (value->empty()) {
        top = key;
        f.json[key] = nullptr;
      } else {
        top.clear();
        f.json[key] = *value;
      }
      f.lines.emplace("/" + key, line_no);
      continue;
    }
    if (top.empty()) return fail(line_no, "indented line outside a block");
    auto& block = f.json[top];
    if (dash) {
      if (block.is_null()) block = nlohmann::json::array();
      if (!block.is_array()) return fail(line_no, "a list item inside a mapping");
      block.push_back(nlohmann::json::object());
      item = static_cast<int>(block.size()) - 1;
      f.lines.emplace("/" + top + "/" + std::to_string(item), line_no);
    } else if (block.is_array()) {
      if (item < 0) return fail(line_no, "expected \"- key: value\"");
    } else {
      if (block.is_null()) block = nlohmann::json::object();
      if (block.contains(key)) return fail(line_no, "\"" + key + "\" appears twice");
      block[key] = *value;
      f.lines.emplace("/" + top + "/" + key, line_no);
      continue;
    }
    auto& obj = block[static_cast<size_t>(item)];
    if (obj.contains(key)) return fail(line_no, "\"" + key + "\" appears twice");
    obj[key] = *value;
    f.lines.emplace("/" + top + "/" + std::to_string(item) + "/" + key, line_no);
  }
  return f;
}

}  // namespace

std::optional<FailOn> ParseFailOn(std::string_view text) {
  std::optional<FailOn> out;
  if (text == "none") {
    out.emplace();
  } else if (auto s = ParseSeverity(text)) {
    out.emplace();
    out->at = *s;
  }
  return out;
}

bool Fails(FailOn gate, Severity severity) { return gate.at && severity >= *gate.at; }

util::Expected<Config> ParseConfig(const std::string& path, std::string_view text,
                                   const Knowledge& knowledge) {
  bool json = path.ends_with(".json");
  auto parsed = json ? ParseDataFile(path, text) : ParseYaml(path, text);
  if (!parsed) return parsed.error();
  const DataFile& f = *parsed;
  Config c;
  c.path = path;
  auto where = [&](const std::string& pointer) {
    return path + ":" + std::to_string(f.Line(pointer));
  };
  auto error = [&](const std::string& pointer, const std::string& m) {
    return util::MakeError(f.Where(pointer, m));
  };
  auto rule_id = [&](const std::string& pointer,
                     const std::string& word) -> util::Expected<std::string> {
    if (const RuleInfo* r = knowledge.Rule(word)) return r->id;
    std::string hint = knowledge.SuggestRule(word);
    return error(pointer, "unknown rule \"" + word + "\"" +
                              (hint.empty() ? "" : "; did you mean " + hint + "?"));
  };
  for (const auto& [key, value] : f.json.items()) {
    std::string at = "/" + key;
    if (key == "fail-on") {
      auto fo = value.is_string() ? ParseFailOn(value.get<std::string>()) : std::nullopt;
      if (!fo) return error(at, "fail-on must be none, info, warning or error");
      c.fail_on = *fo;
    } else if (key == "severity") {
      if (!value.is_object())
        return error(at, "severity must map rule IDs to error, warning or info");
      for (const auto& [id, sev] : value.items()) {
        auto rid = rule_id(at + "/" + id, id);
        if (!rid) return rid.error();
        auto s = sev.is_string() ? ParseSeverity(sev.get<std::string>()) : std::nullopt;
        if (!s)
          return error(at + "/" + id, "severity of " + id + " must be error, warning or info");
        c.severity[*rid] = *s;
      }
    } else if (key == "ignore") {
      if (!value.is_array()) return error(at, "ignore must be a list of {rule, path, reason}");
      for (size_t i = 0; i < value.size(); ++i) {
        std::string item = at + "/" + std::to_string(i);
        const auto& e = value[i];
        if (!e.is_object()) return error(item, "an ignore must be {rule, path, reason}");
        for (const auto& [k, v] : e.items()) {
          if (k != "rule" && k != "path" && k != "reason")
            return error(item + "/" + k, "unknown key \"" + k + "\" in an ignore");
          if (!v.is_string()) return error(item + "/" + k, "\"" + k + "\" must be a string");
        }
        Ignore ig;
        if (!e.contains("rule")) return error(item, "an ignore needs a \"rule\"");
        auto rid = rule_id(item + "/rule", e["rule"].get<std::string>());
        if (!rid) return rid.error();
        ig.rule = *rid;
        ig.path = e.value("path", "");
        ig.reason = e.value("reason", "");
        if (ig.reason.empty())
          return error(item, "the ignore of " + ig.rule + " needs a \"reason\"");
        ig.where = where(item);
        c.ignores.push_back(std::move(ig));
      }
    } else {
      return error(at, "unknown key \"" + key + "\" (expected fail-on, severity, ignore)");
    }
  }
  return c;
}

std::string FindConfig(const std::string& dir) {
  for (const char* name : {".imgcheck.yaml", ".imgcheck.yml", ".imgcheck.json"}) {
    std::filesystem::path p = std::filesystem::path(dir) / name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

bool PathGlobMatch(std::string_view glob, std::string_view path) {
  size_t star2 = glob.find("**");
  if (star2 == std::string_view::npos) return util::GlobMatch(glob, path);
  // "PREFIX**SUFFIX": PREFIX matches a leading part of the path ending at a component boundary
  // (or the whole PREFIX is a component prefix), and SUFFIX matches the rest at any depth.
  std::string_view prefix = glob.substr(0, star2), suffix = glob.substr(star2 + 2);
  if (!suffix.empty() && suffix[0] == '/') suffix.remove_prefix(1);
  for (size_t cut = 0; cut <= path.size(); ++cut) {
    if (!util::GlobMatch(prefix, path.substr(0, cut)) && !(prefix.empty() && cut == 0)) continue;
    std::string_view rest = path.substr(cut);
    if (suffix.empty()) return true;
    for (size_t j = 0; j <= rest.size(); ++j)
      if ((j == 0 || rest[j - 1] == '/') && PathGlobMatch(suffix, rest.substr(j))) return true;
  }
  return false;
}

std::vector<Suppressed> ApplyConfig(const Config& config, std::vector<Finding>& findings) {
  std::vector<Suppressed> removed;
  std::vector<Finding> kept;
  for (auto& f : findings) {
    if (auto it = config.severity.find(f.rule); it != config.severity.end())
      f.severity = it->second;
    const Ignore* hit = nullptr;
    for (const auto& ig : config.ignores) {
      if (ig.rule != f.rule) continue;
      if (ig.path.empty() || std::any_of(f.paths.begin(), f.paths.end(), [&](const std::string& p) {
            return PathGlobMatch(ig.path, p);
          })) {
        hit = &ig;
        break;
      }
    }
    if (hit)
      removed.push_back({std::move(f), *hit});
    else
      kept.push_back(std::move(f));
  }
  findings = std::move(kept);
  return removed;
}

}  // namespace imgcheck::rules

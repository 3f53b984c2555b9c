#include "rules/config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "util/clock.h"
#include "util/path.h"
#include "util/text.h"

namespace imgcheck::rules {

namespace {

// One YAML node as the JSON a .json config holds (scalars as strings, as the checks below read
// them), recording the line of every value under its JSON pointer for messages.
util::Expected<nlohmann::json> ToJson(const YAML::Node& node, const std::string& pointer,
                                      DataFile& f, const std::string& path, int depth) {
  auto fail = [&](const YAML::Node& n, const std::string& m) {
    return util::MakeError(path + ":" + std::to_string(n.Mark().line + 1) + ": " + m);
  };
  if (depth > 16) return fail(node, "nested too deeply");
  if (!pointer.empty()) f.lines.emplace(pointer, node.Mark().line + 1);
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) return fail(kv.first, "a key must be a plain string");
        std::string key = kv.first.Scalar();
        if (out.contains(key)) return fail(kv.first, "\"" + key + "\" appears twice");
        f.lines.emplace(pointer + "/" + key, kv.first.Mark().line + 1);
        auto value = ToJson(kv.second, pointer + "/" + key, f, path, depth + 1);
        if (!value) return value.error();
        out[key] = std::move(*value);
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        auto value = ToJson(node[i], pointer + "/" + std::to_string(i), f, path, depth + 1);
        if (!value) return value.error();
        out.push_back(std::move(*value));
      }
      return out;
    }
    case YAML::NodeType::Scalar:
      return nlohmann::json(node.Scalar());
    default:
      return nlohmann::json(nullptr);
  }
}

// Full YAML 1.2 through yaml-cpp (flow collections, block scalars, anchors), as the same JSON a
// .json config holds. A syntax error is "path:line: message".
util::Expected<DataFile> ParseYaml(const std::string& path, std::string_view text) {
  DataFile f;
  f.path = path;
  f.name = std::filesystem::path(path).filename().string();
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return util::MakeError(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsDefined() || root.IsNull()) {
    f.json = nlohmann::json::object();
    return f;
  }
  if (!root.IsMap()) return util::MakeError(path + ":1: the config must be a mapping of keys");
  auto json = ToJson(root, "", f, path, 0);
  if (!json) return json.error();
  f.json = std::move(*json);
  return f;
}

// "YYYY-MM-DD" with a month 01-12 and a day 01-31.
bool IsDate(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (s[i] < '0' || s[i] > '9') return false;
  int month = std::stoi(s.substr(5, 2)), day = std::stoi(s.substr(8, 2));
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
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
                                   const Knowledge& knowledge, std::string_view today) {
  std::string now(today);
  if (now.empty()) now = util::UtcNow("%Y-%m-%d");
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
          if (k != "rule" && k != "path" && k != "reason" && k != "expires")
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
        ig.expires = e.value("expires", "");
        if (!ig.expires.empty() && !IsDate(ig.expires))
          return error(item + "/expires",
                       "expires must be a date, YYYY-MM-DD, not \"" + ig.expires + "\"");
        // ISO dates compare as strings; the ignore holds through its `expires` day.
        if (!ig.expires.empty() && ig.expires < now) {
          c.expired.push_back(ig.where + ": the ignore of " + ig.rule + " expired on " +
                              ig.expires + " and no longer applies (" + ig.reason + ")");
          continue;
        }
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

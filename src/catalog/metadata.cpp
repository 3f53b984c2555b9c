#include "catalog/metadata.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

#include "util/path.h"
#include "util/text.h"

namespace imgcheck::catalog {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

using util::Trim;

/// Calls `fn(line)` for each line (without '\n' or '\r').
template <class Fn>
void ForEachLine(std::string_view text, Fn fn) {
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

/// The integer value of `#define NAME <digits>` in C header text.
std::optional<long> Define(std::string_view text, std::string_view name) {
  std::optional<long> value;
  ForEachLine(text, [&](std::string_view line) {
    line = Trim(line);
    if (!line.starts_with("#")) return;
    line = Trim(line.substr(1));
    if (!line.starts_with("define")) return;
    line = Trim(line.substr(6));
    if (!line.starts_with(name)) return;
    line = line.substr(name.size());
    if (line.empty() || !std::isspace(static_cast<unsigned char>(line.front()))) return;
    line = Trim(line);
    size_t digits = 0;
    while (digits < line.size() && IsDigit(line[digits])) ++digits;
    if (!value) value = util::ParseInt<long>(line.substr(0, digits));
  });
  return value;
}

// A small reader of Python literals: enough for generated version/build files.
class PyLexer {
 public:
  explicit PyLexer(std::string_view s) : s_(s) {}
  bool AtEnd() { return Skip(), pos_ >= s_.size(); }
  bool Eat(char c) {
    Skip();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  bool EatWord(std::string_view w) {
    Skip();
    if (s_.substr(pos_, w.size()) == w) return pos_ += w.size(), true;
    return false;
  }
  /// A string, number, True/False/None, or a list/tuple of those (joined with ',').
  std::optional<std::string> Value(int depth = 0) {
    Skip();
    if (pos_ >= s_.size() || depth > 4) return std::nullopt;
    char c = s_[pos_];
    if (c == '\'' || c == '"') return String();
    if (c == '[' || c == '(') {
      char close = c == '[' ? ']' : ')';
      ++pos_;
      std::string joined;
      bool first = true;
      while (!Eat(close)) {
        std::optional<std::string> v = Value(depth + 1);
        if (!v) return std::nullopt;
        if (!first) joined += ',';
        joined += *v;
        first = false;
        if (!Eat(',') && !Peek(close)) return std::nullopt;
      }
      return joined;
    }
    for (std::string_view w : {"True", "False", "None"}) {
      if (EatWord(w)) return std::string(w);
    }
    size_t start = pos_;
    while (pos_ < s_.size() && (IsDigit(s_[pos_]) || s_[pos_] == '.' || s_[pos_] == '-')) ++pos_;
    if (pos_ > start) return std::string(s_.substr(start, pos_ - start));
    return std::nullopt;
  }
  /// OrderedDict([('k', v), ...]) / dict literal pairs into `out`.
  void Pairs(BuildFacts& out) {
    EatWord("collections.");
    if (EatWord("OrderedDict(") || EatWord("dict(")) {
      if (!Eat('[')) return;
      while (Eat('(')) {
        std::optional<std::string> k = String();
        if (!k || !Eat(',')) return;
        std::optional<std::string> v = Value();
        if (!v || !Eat(')')) return;
        out[*k] = *v;
        if (!Eat(',')) break;
      }
      return;
    }
    if (!Eat('{')) return;
    while (!Eat('}')) {
      std::optional<std::string> k = String();
      if (!k || !Eat(':')) return;
      std::optional<std::string> v = Value();
      if (!v) return;
      out[*k] = *v;
      if (!Eat(',') && !Peek('}')) return;
    }
  }
  std::optional<std::string> String() {
    Skip();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return std::nullopt;
    char quote = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\n') return std::nullopt;
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) return std::nullopt;
    ++pos_;
    return out;
  }

 private:
  bool Peek(char c) { return Skip(), pos_ < s_.size() && s_[pos_] == c; }
  void Skip() {
    while (pos_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[pos_]))) {
        ++pos_;
      } else if (s_[pos_] == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

namespace {

// Where the ".so" part of a library name starts; npos when it has none.
size_t SoPart(std::string_view file_name) {
  size_t so = file_name.find(".so");
  while (so != std::string_view::npos) {
    size_t after = so + 3;
    if (after == file_name.size() || file_name[after] == '.') return so;
    so = file_name.find(".so", after);
  }
  return std::string_view::npos;
}

// Length of the auditwheel hash ("-74a4c495") that ends `base`, 0 when there is none.
size_t VendoredHash(std::string_view base) {
  constexpr size_t kLen = 9;  // '-' and 8 lowercase hex digits
  if (base.size() <= kLen || base[base.size() - kLen] != '-') return 0;
  for (char c : base.substr(base.size() - kLen + 1))
    if (!IsDigit(c) && (c < 'a' || c > 'f')) return 0;
  return kLen;
}

}  // namespace

std::string_view LibraryBaseName(std::string_view file_name) {
  size_t so = SoPart(file_name);
  if (so == std::string_view::npos) return {};
  std::string_view base = file_name.substr(0, so);
  return base.substr(0, base.size() - VendoredHash(base));
}

std::string UnvendoredName(std::string_view file_name) {
  size_t so = SoPart(file_name);
  if (so == std::string_view::npos) return std::string(file_name);
  size_t hash = VendoredHash(file_name.substr(0, so));
  return std::string(file_name.substr(0, so - hash)) + std::string(file_name.substr(so));
}

bool IsVendoredName(std::string_view file_name) {
  size_t so = SoPart(file_name);
  return so != std::string_view::npos && VendoredHash(file_name.substr(0, so)) != 0;
}

std::string FilenameVersion(std::string_view file_name) {
  size_t so = SoPart(file_name);
  if (so == std::string_view::npos || so + 4 >= file_name.size()) return {};
  std::string_view rest = file_name.substr(so + 4);
  size_t n = 0;
  while (n < rest.size() && (IsDigit(rest[n]) || (rest[n] == '.' && n > 0))) ++n;
  while (n > 0 && rest[n - 1] == '.') --n;
  return std::string(rest.substr(0, n));
}

std::string UpstreamVersion(std::string_view dpkg_version) {
  std::string_view v = Trim(dpkg_version);
  size_t colon = v.find(':');
  if (colon != std::string_view::npos && colon < v.find('-')) v.remove_prefix(colon + 1);
  size_t dash = v.rfind('-');
  if (dash != std::string_view::npos) v = v.substr(0, dash);
  return std::string(v);
}

int VersionPrecision(std::string_view version) {
  int fields = 0;
  for (std::string_view f : util::Split(version, '.')) {
    if (f.empty() || !IsDigit(f.front())) break;
    ++fields;
    size_t i = 0;
    while (i < f.size() && IsDigit(f[i])) ++i;
    if (i != f.size()) break;  // "0+cu121": counts, but ends the run
  }
  return fields;
}

std::string NormalizeDistName(std::string_view name) {
  std::string out;
  bool sep = false;
  for (char c : Trim(name)) {
    if (c == '-' || c == '_' || c == '.') {
      sep = true;
      continue;
    }
    if (sep && !out.empty()) out += '-';
    sep = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::vector<Md5sumsLibrary> ParseMd5sumsLibraries(std::string_view text) {
  std::vector<Md5sumsLibrary> out;
  for (const std::string& line : util::Split(text, '\n')) {
    if (line.size() < 35 || line.compare(32, 2, "  ") != 0 ||
        line.find(".so", 34) == std::string::npos ||
        !std::all_of(line.begin(), line.begin() + 32, [](char c) { return std::isxdigit(c); }))
      continue;
    out.push_back({line.substr(0, 32), "/" + line.substr(34)});
  }
  return out;
}

std::vector<DpkgPackage> ParseDpkgStatus(std::string_view text) {
  std::vector<DpkgPackage> out;
  DpkgPackage current;
  auto flush = [&] {
    if (!current.name.empty()) out.push_back(current);
    current = DpkgPackage{};
  };
  ForEachLine(text, [&](std::string_view line) {
    if (Trim(line).empty()) return flush();
    if (line.front() == ' ' || line.front() == '\t') return;  // continuation
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    std::string_view key = line.substr(0, colon);
    std::string value(Trim(line.substr(colon + 1)));
    if (key == "Package")
      current.name = value;
    else if (key == "Version")
      current.version = value;
    else if (key == "Architecture")
      current.architecture = value;
    else if (key == "Status")
      current.status = value;
    else if (key == "Auto-Installed")
      current.auto_installed = value == "1";
  });
  flush();
  return out;
}

namespace {

// The package name a spec or argument starts with ("cudnn=8.9" -> "cudnn", "torch[cuda]>=2" ->
// "torch", "libcudnn8:amd64" -> "libcudnn8"); "" when it starts with none.
std::string SpecName(std::string_view spec) {
  size_t end = 0;
  while (end < spec.size() &&
         (std::isalnum(static_cast<unsigned char>(spec[end])) || spec[end] == '-' ||
          spec[end] == '_' || spec[end] == '.' || spec[end] == '+'))
    ++end;
  return std::string(spec.substr(0, end));
}

}  // namespace

std::vector<std::string> ParseCondaHistorySpecs(std::string_view text) {
  std::vector<std::string> out;
  ForEachLine(text, [&](std::string_view line) {
    line = Trim(line);
    for (std::string_view prefix : {"# update specs:", "# install specs:"}) {
      if (!line.starts_with(prefix)) continue;
      std::string_view list = line.substr(prefix.size());
      // ['cudnn=8.9', "numpy"]: every quoted item.
      for (size_t at = 0; at < list.size();) {
        size_t open = list.find_first_of("'\"", at);
        if (open == std::string_view::npos) break;
        size_t close = list.find(list[open], open + 1);
        if (close == std::string_view::npos) break;
        std::string_view spec = list.substr(open + 1, close - open - 1);
        // "conda-forge::cudnn=8.9": the channel is not the name.
        if (size_t colons = spec.rfind("::"); colons != std::string_view::npos)
          spec = spec.substr(colons + 2);
        if (std::string name = SpecName(spec); !name.empty()) out.push_back(std::move(name));
        at = close + 1;
      }
    }
  });
  return out;
}

std::vector<std::string> InstalledOnCommandLine(std::string_view command,
                                                std::string_view manager) {
  std::vector<std::string> words;
  std::string word;
  auto end_word = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  char quote = 0;
  for (char c : command) {
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == ';' || c == '|' || c == '&' || c == '\n') {
      end_word();
      if (words.empty() || words.back() != ";") words.emplace_back(";");  // a command ends
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      end_word();
    } else {
      word += c;
    }
  }
  end_word();
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) {
    // The command: apt-get/apt, or pip/pip3/pipN.M, or python -m pip, then "install".
    std::string_view w = util::BaseName(words[i]);
    bool apt = w == "apt-get" || w == "apt";
    bool pip = w.starts_with("pip") &&
               SpecName(w.substr(3)).find_first_not_of("0123456789.") == std::string::npos;
    if (i + 1 < words.size() && words[i] == "-m" && words[i + 1] == "pip") pip = true;
    if (!(manager == "apt" ? apt : pip)) continue;
    size_t j = i + 1;
    while (j < words.size() && words[j] != ";" && words[j] != "install") ++j;
    if (j >= words.size() || words[j] != "install") continue;
    for (++j; j < words.size() && words[j] != ";"; ++j) {
      const std::string& arg = words[j];
      if (arg.starts_with("-")) {
        // Options that take a value as the next word.
        if (arg == "-r" || arg == "-c" || arg == "-t" || arg == "-e" || arg == "-o" ||
            arg == "--requirement" || arg == "--constraint" || arg == "--target" ||
            arg == "--index-url" || arg == "--extra-index-url" || arg == "-i" || arg == "-f" ||
            arg == "--find-links")
          ++j;
        continue;
      }
      if (arg.find('/') != std::string::npos || arg.ends_with(".deb") || arg.ends_with(".whl"))
        continue;  // a file, not a name
      if (std::string name = SpecName(arg); !name.empty()) out.push_back(std::move(name));
    }
    i = j;
  }
  return out;
}

Requirement ParseRequirement(std::string_view value) {
  Requirement r;
  r.raw = std::string(Trim(value));
  std::string_view s = r.raw;
  size_t semi = s.find(';');
  if (semi != std::string_view::npos) {
    r.marker = std::string(Trim(s.substr(semi + 1)));
    s = s.substr(0, semi);
  }
  s = Trim(s);
  size_t i = 0;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' ||
                          s[i] == '_' || s[i] == '.')) {
    ++i;
  }
  r.name = NormalizeDistName(s.substr(0, i));
  std::string_view spec = Trim(s.substr(i));
  if (!spec.empty() && spec.front() == '[') {  // extras
    size_t close = spec.find(']');
    if (close != std::string_view::npos)
      for (const std::string& extra : util::Split(spec.substr(1, close - 1), ','))
        if (!Trim(extra).empty()) r.extras.push_back(NormalizeDistName(Trim(extra)));
    spec = close == std::string_view::npos ? std::string_view{} : Trim(spec.substr(close + 1));
  }
  // `extra == "name"` clauses of the marker (either quote; PEP 508's `"name" == extra` is not
  // what wheel builders write).
  std::string_view marker = r.marker;
  for (size_t at = marker.find("extra"); at != std::string_view::npos;
       at = marker.find("extra", at + 5)) {
    std::string_view rest = Trim(marker.substr(at + 5));
    if (!rest.starts_with("==")) continue;
    rest = Trim(rest.substr(2));
    if (rest.empty() || (rest.front() != '"' && rest.front() != '\'')) continue;
    size_t end = rest.find(rest.front(), 1);
    if (end != std::string_view::npos)
      r.under_extras.push_back(NormalizeDistName(rest.substr(1, end - 1)));
  }
  if (!spec.empty() && spec.front() == '(' && spec.back() == ')') {
    spec = Trim(spec.substr(1, spec.size() - 2));
  }
  std::string compact;
  for (char c : spec) {
    if (c != ' ') compact += c;
  }
  r.specifier = compact;
  return r;
}

DistMetadata ParseDistMetadata(std::string_view text) {
  DistMetadata m;
  bool done = false;
  ForEachLine(text, [&](std::string_view line) {
    if (done) return;
    if (Trim(line).empty()) return void(done = true);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || line.front() == ' ') return;
    std::string_view key = line.substr(0, colon);
    std::string_view value = Trim(line.substr(colon + 1));
    if (key == "Name")
      m.name = std::string(value);
    else if (key == "Version")
      m.version = std::string(value);
    else if (key == "Requires-Dist")
      m.requires_dist.push_back(ParseRequirement(value));
  });
  return m;
}

std::vector<RecordEntry> ParseRecord(std::string_view text) {
  std::vector<RecordEntry> out;
  ForEachLine(text, [&](std::string_view line) {
    if (line.empty()) return;
    RecordEntry e;
    std::string_view rest;
    if (line.front() == '"') {
      size_t i = 1;
      for (; i < line.size(); ++i) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            e.path += '"';
            ++i;
          } else {
            break;
          }
        } else {
          e.path += line[i];
        }
      }
      rest = line.substr(std::min(i + 1, line.size()));
    } else {
      e.path = std::string(line.substr(0, line.find(',')));
      rest = line.substr(e.path.size());
    }
    // The size is the last field; empty for RECORD itself and *.pyc.
    if (size_t comma = rest.rfind(','); comma != std::string_view::npos) {
      std::string_view digits = rest.substr(comma + 1);
      uint64_t size = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
      if (!digits.empty() && ec == std::errc() && end == digits.data() + digits.size())
        e.size = size;
    }
    if (!e.path.empty()) out.push_back(std::move(e));
  });
  return out;
}

util::Expected<CondaPackage> ParseCondaMeta(std::string_view json) {
  try {
    nlohmann::json doc = nlohmann::json::parse(json);
    CondaPackage p;
    p.name = doc.at("name").get<std::string>();
    p.version = doc.at("version").get<std::string>();
    if (doc.contains("build")) p.build = doc["build"].get<std::string>();
    if (doc.contains("files")) {
      for (const auto& f : doc["files"]) p.files.push_back(f.get<std::string>());
    }
    return p;
  } catch (const std::exception& e) {
    return util::MakeError(std::string("conda-meta: ") + e.what());
  }
}

std::optional<std::string> CudnnHeaderVersion(std::string_view text) {
  std::optional<long> major = Define(text, "CUDNN_MAJOR");
  std::optional<long> minor = Define(text, "CUDNN_MINOR");
  std::optional<long> patch = Define(text, "CUDNN_PATCHLEVEL");
  if (!major || !minor || !patch) return std::nullopt;
  return std::to_string(*major) + "." + std::to_string(*minor) + "." + std::to_string(*patch);
}

std::optional<std::string> CudartHeaderVersion(std::string_view text) {
  std::optional<long> v = Define(text, "CUDART_VERSION");
  if (!v) return std::nullopt;
  return CudaVersionString(*v);
}

CudaVersion DecodeCudaVersion(int64_t encoded) { return {encoded / 1000, encoded % 1000 / 10}; }

std::string CudaVersionString(int64_t encoded) {
  CudaVersion v = DecodeCudaVersion(encoded);
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

util::Expected<std::map<std::string, std::string>> ParseCudaVersionJson(std::string_view json) {
  try {
    nlohmann::json doc = nlohmann::json::parse(json);
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : doc.items()) {
      if (value.is_object() && value.contains("version") && value["version"].is_string()) {
        out[key] = value["version"].get<std::string>();
      }
    }
    return out;
  } catch (const std::exception& e) {
    return util::MakeError(std::string("version.json: ") + e.what());
  }
}

std::optional<std::string> ParseCudaVersionTxt(std::string_view text) {
  constexpr std::string_view kPrefix = "CUDA Version ";
  size_t at = text.find(kPrefix);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + kPrefix.size());
  size_t n = 0;
  while (n < rest.size() && (IsDigit(rest[n]) || rest[n] == '.')) ++n;
  if (n == 0) return std::nullopt;
  return std::string(rest.substr(0, n));
}

BuildFacts ParsePythonLiterals(std::string_view text) {
  BuildFacts out;
  ForEachLine(text, [&](std::string_view line) {
    if (line.empty() ||
        !(std::isalpha(static_cast<unsigned char>(line.front())) || line.front() == '_')) {
      return;
    }
    size_t i = 0;
    while (i < line.size() &&
           (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_')) {
      ++i;
    }
    std::string name(line.substr(0, i));
    std::string_view rest = Trim(line.substr(i));
    if (!rest.empty() && rest.front() == ':') {  // annotation: "cuda: Optional[str] = '12.1'"
      size_t eq = rest.find('=');
      if (eq == std::string_view::npos) return;
      rest = rest.substr(eq);
    }
    if (rest.empty() || rest.front() != '=' || rest.starts_with("==")) return;
    // The value may continue on later lines (lists, OrderedDicts): lex from here on.
    std::string_view from = text.substr(static_cast<size_t>(rest.data() + 1 - text.data()));
    PyLexer lex(from);
    std::string_view head = Trim(rest.substr(1));
    if (head.starts_with("collections.") || head.starts_with("OrderedDict(") ||
        head.starts_with("dict(") || head.starts_with("{")) {
      lex.Pairs(out);
      return;
    }
    if (std::optional<std::string> v = lex.Value()) out[name] = *v;
  });
  return out;
}

util::Expected<BuildFacts> ParseCupyWheelJson(std::string_view json) {
  try {
    nlohmann::json doc = nlohmann::json::parse(json);
    BuildFacts out;
    for (const auto& [key, value] : doc.items()) {
      if (value.is_string()) out[key] = value.get<std::string>();
      if (value.is_object() && value.contains("version") && value["version"].is_string()) {
        out[key + ".version"] = value["version"].get<std::string>();
      }
    }
    return out;
  } catch (const std::exception& e) {
    return util::MakeError(std::string("_wheel.json: ") + e.what());
  }
}

std::map<std::string, std::string> ParseOsRelease(std::string_view text) {
  std::map<std::string, std::string> out;
  ForEachLine(text, [&](std::string_view line) {
    line = Trim(line);
    if (line.empty() || line.front() == '#') return;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) return;
    std::string_view value = line.substr(eq + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    std::string unescaped;
    for (size_t i = 0; i < value.size(); ++i) {
      if (value[i] == '\\' && i + 1 < value.size()) ++i;
      unescaped += value[i];
    }
    out[std::string(line.substr(0, eq))] = unescaped;
  });
  return out;
}

}  // namespace imgcheck::catalog

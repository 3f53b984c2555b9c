#include "image/dockerfile.h"

#include <algorithm>
#include <cctype>

#include "util/text.h"

namespace imgcheck::image {

namespace {

constexpr std::string_view kKeywords[] = {
    "ADD",    "ARG",   "CMD",         "COPY",  "ENTRYPOINT", "ENV",
    "EXPOSE", "FROM",  "HEALTHCHECK", "LABEL", "MAINTAINER", "ONBUILD",
    "RUN",    "SHELL", "STOPSIGNAL",  "USER",  "VOLUME",     "WORKDIR"};

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view Strip(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

bool IsKeyword(std::string_view word) {
  return std::find(std::begin(kKeywords), std::end(kKeywords), word) != std::end(kKeywords);
}

bool ChangesFiles(const Instruction& i) {
  return i.keyword == "RUN" || i.keyword == "COPY" || i.keyword == "ADD";
}

// Words split at blanks, with "..." and '...' kept together (quotes removed).
std::vector<std::string> Words(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < s.size()) {
        cur += s[++i];
      } else {
        cur += c;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (IsBlank(c) || c == '\n') {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_word) out.push_back(std::move(cur));
  return out;
}

std::string Collapse(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (IsBlank(c) || c == '\n') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// ENV K=V K2="v 2" | ENV K V (legacy); ARG NAME[=default] ...: the names set.
std::vector<std::string> NamesSet(const std::string& keyword, std::string_view args) {
  std::vector<std::string> words = Words(args);
  std::vector<std::string> names;
  if (words.empty()) return names;
  if (keyword == "ENV" && words[0].find('=') == std::string::npos) return {words[0]};
  for (const auto& w : words) {
    size_t eq = w.find('=');
    if (keyword == "ENV" && eq == std::string::npos) continue;
    names.push_back(w.substr(0, eq));
  }
  return names;
}

struct Heredoc {
  std::string delimiter;
  bool strip_tabs = false;
};

// The heredocs a RUN/COPY/ADD line opens: <<EOF, <<-EOF, <<"EOF", <<'EOF' (in order).
std::vector<Heredoc> Heredocs(std::string_view args) {
  std::vector<Heredoc> out;
  for (size_t at = args.find("<<"); at != std::string_view::npos; at = args.find("<<", at + 2)) {
    size_t i = at + 2;
    Heredoc h;
    if (i < args.size() && args[i] == '-') {
      h.strip_tabs = true;
      ++i;
    }
    char quote = 0;
    if (i < args.size() && (args[i] == '"' || args[i] == '\'')) quote = args[i++];
    size_t start = i;
    while (i < args.size() && (std::isalnum(static_cast<unsigned char>(args[i])) || args[i] == '_'))
      ++i;
    if (i == start || (quote && (i >= args.size() || args[i] != quote))) continue;
    h.delimiter = std::string(args.substr(start, i - start));
    out.push_back(h);
  }
  return out;
}

}  // namespace

util::Expected<Dockerfile> ParseDockerfile(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  auto fail = [](size_t line, const std::string& m) {
    return util::MakeError("line " + std::to_string(line + 1) + ": " + m);
  };
  char escape = '\\';
  size_t i = 0;
  // Parser directives: "# name=value" lines at the very top, before anything else.
  for (; i < lines.size(); ++i) {
    std::string_view l = Strip(lines[i]);
    if (l.empty() || l[0] != '#') break;
    std::string_view body = Strip(l.substr(1));
    size_t eq = body.find('=');
    if (eq == std::string_view::npos) break;
    std::string name = util::AsciiLower(Strip(body.substr(0, eq)));
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c));
        }))
      break;
    std::string_view value = Strip(body.substr(eq + 1));
    if (name == "escape") {
      if (value != "\\" && value != "`") return fail(i, "escape must be \\ or `");
      escape = value[0];
    }
  }
  Dockerfile df;
  for (; i < lines.size(); ++i) {
    std::string_view first = Strip(lines[i]);
    if (first.empty() || first[0] == '#') continue;
    Instruction ins;
    ins.line = static_cast<int>(i) + 1;
    std::string logical;
    size_t j = i;
    while (true) {
      std::string_view l = lines[j];
      while (!l.empty() && IsBlank(l.back())) l.remove_suffix(1);
      bool more = !l.empty() && l.back() == escape;
      if (more) l.remove_suffix(1);
      logical += std::string(l);
      if (!more) break;
      logical += ' ';
      // Comment and empty lines inside a continuation are dropped, as the builder does.
      do {
        ++j;
      } while (j < lines.size() && (Strip(lines[j]).empty() || Strip(lines[j])[0] == '#'));
      if (j >= lines.size()) {
        j = lines.size() - 1;
        break;
      }
    }
    std::string_view body = Strip(logical);
    size_t sp = 0;
    while (sp < body.size() && !IsBlank(body[sp])) ++sp;
    ins.keyword = util::AsciiUpper(body.substr(0, sp));
    ins.args = std::string(Strip(body.substr(sp)));
    if (!IsKeyword(ins.keyword)) return fail(i, "unknown instruction \"" + ins.keyword + "\"");
    if (ins.keyword == "RUN" || ins.keyword == "COPY" || ins.keyword == "ADD") {
      for (const Heredoc& h : Heredocs(ins.args)) {
        size_t k = j + 1;
        for (; k < lines.size(); ++k) {
          std::string_view l = lines[k];
          if (h.strip_tabs)
            while (!l.empty() && l.front() == '\t') l.remove_prefix(1);
          if (l == h.delimiter) break;
        }
        if (k >= lines.size()) return fail(i, "heredoc <<" + h.delimiter + " is not terminated");
        j = k;
      }
    }
    ins.end_line = static_cast<int>(j) + 1;
    ins.text = Collapse(ins.keyword + " " + ins.args);
    if (ins.keyword == "ENV" || ins.keyword == "ARG") ins.sets = NamesSet(ins.keyword, ins.args);
    if (ins.keyword == "FROM") {
      Stage st;
      std::vector<std::string> words;
      for (auto& w : Words(ins.args))
        if (w.rfind("--", 0) != 0) words.push_back(std::move(w));
      if (words.empty()) return fail(i, "FROM names no image");
      st.base = words[0];
      if (words.size() >= 3 && util::AsciiLower(words[1]) == "as")
        st.name = util::AsciiLower(words[2]);
      for (size_t s = 0; s < df.stages.size(); ++s)
        if (!df.stages[s].name.empty() && df.stages[s].name == util::AsciiLower(st.base))
          st.parent = static_cast<int>(s);
      st.instructions.push_back(std::move(ins));
      df.stages.push_back(std::move(st));
    } else if (df.stages.empty()) {
      if (ins.keyword != "ARG") return fail(i, ins.keyword + " before the first FROM");
      df.global.push_back(std::move(ins));
    } else {
      df.stages.back().instructions.push_back(std::move(ins));
    }
    i = j;
  }
  if (df.stages.empty()) return util::MakeError("no FROM instruction");
  return df;
}

std::string HistoryKeyword(std::string_view created_by) {
  std::string_view s = Strip(created_by);
  // The classic builder and buildah prefix build args as "|N A=1 B=2 " before the shell.
  if (!s.empty() && s[0] == '|') {
    size_t shell = s.find("/bin/sh -c ");
    if (shell == std::string_view::npos) return "";
    s = s.substr(shell);
  }
  constexpr std::string_view kShell = "/bin/sh -c ";
  if (s.substr(0, kShell.size()) == kShell) {
    s = Strip(s.substr(kShell.size()));
    constexpr std::string_view kNop = "#(nop)";
    if (s.substr(0, kNop.size()) != kNop) return "RUN";
    s = Strip(s.substr(kNop.size()));
  }
  size_t sp = 0;
  while (sp < s.size() && !IsBlank(s[sp])) ++sp;
  std::string word = util::AsciiUpper(s.substr(0, sp));
  return IsKeyword(word) && word != "FROM" ? word : "";
}

BuildMap MapBuild(const Dockerfile& dockerfile, const std::vector<HistoryEntry>& history,
                  size_t layer_count) {
  BuildMap map;
  map.layers.resize(layer_count);
  if (dockerfile.stages.empty()) return map;
  std::vector<const Stage*> stages;
  for (int s = static_cast<int>(dockerfile.stages.size()) - 1; s >= 0;
       s = dockerfile.stages[s].parent)
    stages.insert(stages.begin(), &dockerfile.stages[s]);
  map.chain.push_back(&stages[0]->instructions[0]);
  for (const Stage* st : stages)
    for (size_t k = 1; k < st->instructions.size(); ++k) map.chain.push_back(&st->instructions[k]);

  // From the last entry back: each entry takes the nearest earlier instruction of its keyword;
  // instructions a builder records no entry for (BuildKit's ARG) are passed over.
  std::vector<int> match(history.size(), -1);
  int next = static_cast<int>(map.chain.size()) - 1;
  int first_matched = static_cast<int>(history.size());
  for (int h = static_cast<int>(history.size()) - 1; h >= 0 && next >= 1; --h) {
    std::string kw = HistoryKeyword(history[h].created_by);
    if (kw.empty()) continue;
    for (int c = next; c >= 1; --c)
      if (map.chain[c]->keyword == kw) {
        match[h] = c;
        next = c - 1;
        first_matched = h;
        break;
      }
  }
  size_t layers_in_history = 0;
  for (const auto& e : history) layers_in_history += !e.empty_layer;
  if (layers_in_history != layer_count) return map;  // cannot tell which entry made which layer
  size_t layer = 0;
  for (int h = 0; h < static_cast<int>(history.size()); ++h) {
    if (history[h].empty_layer) continue;
    auto& out = map.layers[layer++];
    if (h < first_matched) {
      out.push_back(map.chain[0]);
      continue;
    }
    if (match[h] < 0) continue;
    out.push_back(map.chain[match[h]]);
    // buildah without --layers commits a stage as one layer and records the instructions
    // before the last as empty: their files are in this layer.
    for (int e = h - 1; e >= 0 && history[e].empty_layer; --e)
      if (match[e] >= 1 && ChangesFiles(*map.chain[match[e]]))
        out.insert(out.begin(), map.chain[match[e]]);
  }
  return map;
}

const Instruction* Locate(const BuildMap& map, int layer, std::string_view path,
                          std::string_view env) {
  const Instruction* found = nullptr;
  if (layer >= 0 && static_cast<size_t>(layer) < map.layers.size()) {
    const auto& list = map.layers[layer];
    for (const Instruction* i : list) {
      if (i->keyword != "COPY" && i->keyword != "ADD") continue;
      std::vector<std::string> words;
      for (auto& w : Words(i->args))
        if (w.rfind("--", 0) != 0) words.push_back(std::move(w));
      if (words.size() < 2 || words.back().empty() || words.back()[0] != '/') continue;
      std::string dest = words.back();
      while (dest.size() > 1 && dest.back() == '/') dest.pop_back();
      if (dest == "/" || path == dest ||
          (path.substr(0, dest.size()) == dest && path.size() > dest.size() &&
           path[dest.size()] == '/'))
        found = i;
    }
    if (!found)
      for (const Instruction* i : list)
        if (ChangesFiles(*i)) found = i;
    if (!found && !list.empty()) found = list.back();
  }
  if (found && found->keyword != "FROM") return found;
  for (std::string_view kind : {"ENV", "ARG"})  // an ENV sets the image's Env; an ARG feeds it
    for (auto it = map.chain.rbegin(); !env.empty() && it != map.chain.rend(); ++it)
      if ((*it)->keyword == kind &&
          std::find((*it)->sets.begin(), (*it)->sets.end(), env) != (*it)->sets.end())
        return *it;
  if (found) return found;
  // A configuration variable the Dockerfile never set came with the base image.
  if (!env.empty() && !map.chain.empty()) return map.chain[0];
  return nullptr;
}

}  // namespace imgcheck::image

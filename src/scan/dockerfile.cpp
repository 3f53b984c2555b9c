#include "scan/dockerfile.h"

#include <filesystem>
#include <optional>

#include "image/dockerfile.h"
#include "util/error.h"
#include "util/file.h"
#include "util/path.h"

namespace imgcheck::scan {

namespace {

// The Dockerfile's path as code scanning wants it: relative to the repository root (the nearest
// directory above it with a .git), else to the working directory, else as given.
std::string RepositoryPath(const std::string& dockerfile) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(dockerfile, ec), ec);
  for (fs::path dir = abs.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / ".git", ec)) return abs.lexically_relative(dir).generic_string();
    if (dir == dir.parent_path()) break;
  }
  fs::path rel = abs.lexically_relative(fs::current_path(ec));
  return rel.empty() || *rel.begin() == ".." ? dockerfile : rel.generic_string();
}

// `# imgcheck ignore=IC020[,IC051] reason="..."` on the line before an instruction (hadolint's
// spelling): findings mapped to that instruction move to the suppressed, with the reason and
// the comment's line. A reason is required, as in the config file.
void ApplyInlineIgnores(const std::string& text, const std::string& shown, report::Report& rep) {
  std::vector<std::string> lines = util::Split(text, '\n');
  auto ignores_at = [&](int line) -> std::vector<rules::Ignore> {
    // The line before the instruction (1-based `line`), itself a comment.
    if (line < 2 || static_cast<size_t>(line - 1) > lines.size()) return {};
    std::string comment = lines[static_cast<size_t>(line - 2)];
    size_t hash = comment.find_first_not_of(" \t");
    if (hash == std::string::npos || comment[hash] != '#') return {};
    size_t at = comment.find("imgcheck ignore=", hash);
    if (at == std::string::npos) return {};
    std::string where = shown + ":" + std::to_string(line - 1);
    std::string rest = comment.substr(at + 16);
    std::string ids = rest.substr(0, rest.find_first_of(" \t"));
    size_t r = rest.find("reason=\"");
    size_t end = r == std::string::npos ? r : rest.find('"', r + 8);
    if (end == std::string::npos || end == r + 8)
      throw util::Fatal("--dockerfile: " + where + ": an inline ignore needs reason=\"...\"");
    std::vector<rules::Ignore> out;
    for (const auto& id : util::Split(ids, ',')) {
      const rules::RuleInfo* rule = rep.knowledge ? rep.knowledge->Rule(id) : nullptr;
      if (!rule)
        throw util::Fatal("--dockerfile: " + where + ": unknown rule '" + id +
                          "' in an inline ignore");
      out.push_back({rule->id, "", rest.substr(r + 8, end - r - 8), where});
    }
    return out;
  };
  std::vector<rules::Finding> kept;
  for (auto& f : rep.findings) {
    std::optional<rules::Ignore> hit;
    if (f.dockerfile)
      for (auto& i : ignores_at(f.dockerfile->line))
        if (i.rule == f.rule) hit = std::move(i);
    if (hit) {
      rep.suppressed.push_back({std::move(f), std::move(*hit)});
    } else {
      kept.push_back(std::move(f));
    }
  }
  rep.findings = std::move(kept);
}

}  // namespace

void MapToDockerfile(const std::string& path, const image::Image& image, report::Report& rep) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw util::Fatal("--dockerfile: " + path + " does not exist");
  util::Expected<std::string> text = util::ReadFile(path);
  if (!text) throw util::Fatal("--dockerfile: " + text.error().message);
  auto df = image::ParseDockerfile(*text);
  if (!df) throw util::Fatal("--dockerfile: " + path + ": " + df.error().message);
  image::BuildMap map = image::MapBuild(*df, image.config.history, image.layers.size());
  std::string shown = RepositoryPath(path);
  auto locate = [&](rules::Finding& f) {
    const image::Instruction* i =
        image::Locate(map, f.layer.index, f.paths.empty() ? "" : f.paths[0], f.env);
    // A finding the configuration causes (IC020 through LD_LIBRARY_PATH) is on the ENV/ARG line
    // that set it, what a user changes; the instruction that wrote the file is its evidence.
    if (const image::Instruction* e = f.env.empty() ? nullptr : image::Locate(map, -1, "", f.env);
        e && e != i && (e->keyword == "ENV" || e->keyword == "ARG")) {
      if (i && i->keyword != "FROM") {
        f.evidence.push_back(
            {"written by", shown + ":" + std::to_string(i->line) + ": " + i->text});
        f.written_by = rules::SourceLine{shown, i->line, i->end_line, i->text};
      }
      i = e;
    }
    if (i) f.dockerfile = rules::SourceLine{shown, i->line, i->end_line, i->text};
  };
  for (auto& f : rep.findings) locate(f);
  for (auto& s : rep.suppressed) locate(s.finding);
  rep.dockerfile = true;
  ApplyInlineIgnores(*text, shown, rep);
}

}  // namespace imgcheck::scan

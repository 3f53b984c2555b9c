#include "scan/dockerfile.h"

#include <filesystem>

#include "image/dockerfile.h"
#include "util/error.h"
#include "util/file.h"

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
    if (i) f.dockerfile = rules::SourceLine{shown, i->line, i->end_line, i->text};
  };
  for (auto& f : rep.findings) locate(f);
  for (auto& s : rep.suppressed) locate(s.finding);
  rep.dockerfile = true;
}

}  // namespace imgcheck::scan

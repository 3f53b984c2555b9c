#include "catalog/library_rules.h"

#include <algorithm>

#include "util/path.h"
#include "util/sha256.h"

namespace imgcheck::catalog {
namespace {

bool AnyGlob(const std::vector<std::string>& globs, std::string_view name) {
  for (const std::string& g : globs) {
    if (util::GlobMatch(g, name)) return true;
  }
  return false;
}

Family ParseFamily(const util::Row& row) {
  Family f;
  f.family = row.String("family");
  auto kind = ParseKind(row.String("kind"));
  if (kind != ComponentKind::kCudaLibrary && kind != ComponentKind::kDriverLibrary) {
    row.Fail("kind", "kind must be \"" + std::string(KindName(ComponentKind::kCudaLibrary)) +
                         "\" or \"" + std::string(KindName(ComponentKind::kDriverLibrary)) + "\"");
  }
  f.kind = *kind;
  f.libraries = row.Strings("libraries");
  f.exclude = row.Strings("exclude", false);
  f.dpkg = row.Strings("dpkg", false);
  f.pip = row.Strings("pip", false);
  f.conda = row.Strings("conda", false);
  f.headers = row.Strings("headers", false);
  f.version_json = row.Strings("version_json", false);
  if (row.Has("sub_libraries")) {
    const nlohmann::json& subs = (*row.value)["sub_libraries"];
    if (!subs.is_object()) row.Fail("sub_libraries", "sub_libraries must be an object");
    for (const auto& [major, list] : subs.items()) {
      bool digits =
          !major.empty() && major.size() < 4 &&
          std::all_of(major.begin(), major.end(), [](char c) { return c >= '0' && c <= '9'; });
      bool names = list.is_array() && std::all_of(list.begin(), list.end(),
                                                  [](const auto& n) { return n.is_string(); });
      if (!digits || !names)
        row.Fail("sub_libraries", "sub_libraries maps a major to a list of library names");
      f.sub_libraries[std::stoi(major)] = list.get<std::vector<std::string>>();
    }
  }
  if (row.Has("version_lines")) {
    const nlohmann::json& lines = (*row.value)["version_lines"];
    if (!lines.is_array()) row.Fail("version_lines", "version_lines must be a list");
    for (size_t i = 0; i < lines.size(); ++i) {
      util::Row line{row.file, row.pointer + "/version_lines/" + std::to_string(i), &lines[i]};
      if (!lines[i].is_object()) line.Fail("", "a version line must be an object");
      f.version_lines.push_back(
          {line.String("line"), line.String("version"), line.String("source")});
      if (f.version_lines.back().source.empty())
        line.Fail("source", "a version line has no source");
    }
  }
  f.source = row.String("source");
  if (f.source.empty()) row.Fail("source", "family " + f.family + " has no source");
  return f;
}

}  // namespace

std::string_view Family::LineOf(std::string_view version) const {
  for (const VersionLine& l : version_lines)
    if (util::GlobMatch(l.version, version)) return l.line;
  return "";
}

LibraryRules LibraryRules::FromFiles(const std::vector<util::DataFile>& files) {
  LibraryRules rules;
  auto file = std::find_if(files.rbegin(), files.rend(),
                           [](const util::DataFile& f) { return f.name == "libraries.json"; });
  if (file != files.rend()) {
    util::Row top{&*file, "", &file->json};
    rules.stub_dirs = top.Strings("stub_dirs", false);
    rules.compat_dirs = top.Strings("compat_dirs", false);
    rules.release_dirs = top.Strings("release_dirs", false);
    if (!file->json.contains("families") || !file->json["families"].is_array())
      throw util::Fatal(file->Where("", "libraries.json must have a \"families\" list"));
    const nlohmann::json& families = file->json["families"];
    for (size_t i = 0; i < families.size(); ++i) {
      util::Row row{&*file, "/families/" + std::to_string(i), &families[i]};
      if (!families[i].is_object()) row.Fail("", "a family must be an object");
      rules.families.push_back(ParseFamily(row));
    }
  }
  for (const util::Row& row : util::TableRows(files, "framework_files")) {
    FrameworkFile f;
    f.path = row.String("path");
    f.framework = row.String("framework", false);
    std::string format = row.String("format");
    if (format != "python" && format != "json")
      row.Fail("format", "format must be \"python\" or \"json\"");
    f.json = format == "json";
    f.source = row.String("source");
    rules.framework_files.push_back(std::move(f));
  }
  for (const util::Row& row : util::TableRows(files, "framework_dists"))
    rules.framework_dists.push_back({row.String("dist"), row.String("framework", false),
                                     row.String("module", false), row.String("source")});
  for (const util::Row& row : util::TableRows(files, "cuda_packages")) {
    std::vector<std::string> names = row.Strings("names");
    rules.cuda_packages.insert(rules.cuda_packages.end(), names.begin(), names.end());
  }
  return rules;
}

const FrameworkDist* LibraryRules::FrameworkByDist(std::string_view name) const {
  for (const FrameworkDist& f : framework_dists)
    if (util::GlobMatch(f.dist, name)) return &f;
  return nullptr;
}

const Family* LibraryRules::Classify(std::string_view base_name) const {
  for (const Family& f : families) {
    if (AnyGlob(f.libraries, base_name) && !AnyGlob(f.exclude, base_name)) return &f;
  }
  return nullptr;
}

const Family* LibraryRules::ByPackage(PackageManager manager, std::string_view name) const {
  for (const Family& f : families) {
    const std::vector<std::string>& globs = manager == PackageManager::kDpkg  ? f.dpkg
                                            : manager == PackageManager::kPip ? f.pip
                                                                              : f.conda;
    if (AnyGlob(globs, name)) return &f;
  }
  return nullptr;
}

const Family* LibraryRules::ByHeader(std::string_view file_name) const {
  for (const Family& f : families) {
    if (AnyGlob(f.headers, file_name)) return &f;
  }
  return nullptr;
}

const Family* LibraryRules::Find(std::string_view family) const {
  for (const Family& f : families) {
    if (f.family == family) return &f;
  }
  return nullptr;
}

const FrameworkFile* LibraryRules::Framework(std::string_view path) const {
  for (const FrameworkFile& f : framework_files) {
    size_t parts = static_cast<size_t>(std::count(f.path.begin(), f.path.end(), '/')) + 1;
    // The last `parts` components of `path`.
    size_t start = path.size();
    for (size_t i = 0; i < parts && start != std::string_view::npos; ++i) {
      start = start == 0 ? std::string_view::npos : path.rfind('/', start - 1);
    }
    if (start == std::string_view::npos) continue;
    if (util::GlobMatch(f.path, path.substr(start + 1))) return &f;
  }
  return nullptr;
}

bool LibraryRules::IsCudaPackage(PackageManager manager, std::string_view name) const {
  return ByPackage(manager, name) != nullptr || AnyGlob(cuda_packages, name);
}

std::string LibraryRules::CaptureDigest() const {
  std::string text;
  for (const Family& f : families) {
    for (const std::string& h : f.headers) text += "h " + h + "\n";
  }
  for (const FrameworkFile& f : framework_files) text += "f " + f.path + "\n";
  return util::Sha256Digest(text);
}

}  // namespace imgcheck::catalog

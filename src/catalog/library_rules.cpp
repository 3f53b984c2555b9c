#include "catalog/library_rules.h"

#include <nlohmann/json.hpp>

#include "util/file.h"
#include "util/path.h"

namespace imgcheck::catalog {
namespace {

bool AnyGlob(const std::vector<std::string>& globs, std::string_view name) {
  for (const std::string& g : globs) {
    if (util::GlobMatch(g, name)) return true;
  }
  return false;
}

std::vector<std::string> Strings(const nlohmann::json& object, const char* key) {
  std::vector<std::string> out;
  auto it = object.find(key);
  if (it == object.end()) return out;
  for (const auto& v : *it) out.push_back(v.get<std::string>());
  return out;
}

ComponentKind KindFromName(std::string_view name) {
  if (name == "driver-library") return ComponentKind::kDriverLibrary;
  if (name == "cuda-library") return ComponentKind::kCudaLibrary;
  throw std::invalid_argument("unknown kind '" + std::string(name) + "'");
}

}  // namespace

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

util::Expected<LibraryRules> ParseLibraryRules(std::string_view json) {
  try {
    nlohmann::json doc = nlohmann::json::parse(json);
    LibraryRules rules;
    rules.stub_dirs = Strings(doc, "stub_dirs");
    rules.compat_dirs = Strings(doc, "compat_dirs");
    for (const auto& row : doc.at("families")) {
      Family f;
      f.family = row.at("family").get<std::string>();
      f.kind = KindFromName(row.at("kind").get<std::string>());
      f.libraries = Strings(row, "libraries");
      f.exclude = Strings(row, "exclude");
      f.dpkg = Strings(row, "dpkg");
      f.pip = Strings(row, "pip");
      f.conda = Strings(row, "conda");
      f.headers = Strings(row, "headers");
      f.version_json = Strings(row, "version_json");
      f.source = row.at("source").get<std::string>();
      if (f.source.empty()) throw std::invalid_argument("family " + f.family + " has no source");
      rules.families.push_back(std::move(f));
    }
    return rules;
  } catch (const std::exception& e) {
    return util::MakeError(e.what());
  }
}

LibraryRules LoadLibraryRules(const std::string& rules_dir) {
  std::string path = rules_dir + "/libraries.json";
  util::Expected<std::string> text = util::ReadFile(path);
  if (!text) throw util::Fatal(text.error().message);
  util::Expected<LibraryRules> rules = ParseLibraryRules(*text);
  if (!rules) throw util::Fatal(path + ": " + rules.error().message);
  return std::move(rules).value();
}

}  // namespace imgcheck::catalog

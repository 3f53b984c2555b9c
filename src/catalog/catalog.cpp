#include "catalog/catalog.h"

#include <algorithm>
#include <array>

#include "catalog/metadata.h"
#include "util/names.h"
#include "util/path.h"

namespace imgcheck::catalog {

namespace {

constexpr auto kKindNames =
    std::to_array<util::EnumName<ComponentKind>>({{ComponentKind::kCudaLibrary, "cuda-library"},
                                                  {ComponentKind::kDriverLibrary, "driver-library"},
                                                  {ComponentKind::kDriverStub, "driver-stub"},
                                                  {ComponentKind::kCompatLibrary, "compat-library"},
                                                  {ComponentKind::kCudaToolkit, "cuda-toolkit"},
                                                  {ComponentKind::kHeader, "header"},
                                                  {ComponentKind::kPythonDist, "python-dist"},
                                                  {ComponentKind::kFramework, "framework"},
                                                  {ComponentKind::kOsPackage, "os-package"},
                                                  {ComponentKind::kCondaPackage, "conda-package"}});
static_assert(util::NamesEvery(kKindNames));

constexpr auto kSourceNames =
    std::to_array<util::EnumName<VersionSource>>({{VersionSource::kFilename, "filename"},
                                                  {VersionSource::kSoname, "soname"},
                                                  {VersionSource::kDpkg, "dpkg"},
                                                  {VersionSource::kPipRecord, "pip-record"},
                                                  {VersionSource::kPipMetadata, "pip-metadata"},
                                                  {VersionSource::kConda, "conda"},
                                                  {VersionSource::kHeader, "header"},
                                                  {VersionSource::kVersionJson, "version.json"},
                                                  {VersionSource::kBuildInfo, "build-info"},
                                                  {VersionSource::kEnv, "env"}});
static_assert(util::NamesEvery(kSourceNames));

constexpr auto kManagerNames =
    std::to_array<util::EnumName<PackageManager>>({{PackageManager::kDpkg, "dpkg"},
                                                   {PackageManager::kPip, "pip"},
                                                   {PackageManager::kConda, "conda"}});
static_assert(util::NamesEvery(kManagerNames));

}  // namespace

std::string_view KindName(ComponentKind kind) { return util::Name(kKindNames, kind); }

std::optional<ComponentKind> ParseKind(std::string_view name) {
  return util::Parse(kKindNames, name);
}

std::string_view SourceName(VersionSource source) { return util::Name(kSourceNames, source); }

std::string_view ManagerName(PackageManager manager) { return util::Name(kManagerNames, manager); }

std::string Requirement::Pinned() const {
  std::string_view s = specifier;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (s.starts_with("===")) {
    s.remove_prefix(3);
  } else if (s.starts_with("==")) {
    s.remove_prefix(2);
  } else {
    return {};
  }
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty() || s.find_first_of(",*<>=!~ ") != std::string_view::npos) return {};
  return std::string(s);
}

std::optional<std::string> ImageConfig::Env(std::string_view key) const {
  std::optional<std::string> value;
  for (const auto& [k, v] : env) {
    if (k == key) value = v;
  }
  return value;
}

std::vector<std::string> ImageConfig::LdLibraryPath() const {
  std::optional<std::string> value = Env("LD_LIBRARY_PATH");
  if (!value) return {};
  return util::Split(*value, ':');
}

const elf::ElfInfo* Catalog::Elf(std::string_view path) const {
  auto it = elves_.find(path);
  return it == elves_.end() ? nullptr : &it->second;
}

const PackageRef* Catalog::Owner(std::string_view path) const {
  auto it = owners_.find(path);
  return it == owners_.end() ? nullptr : &it->second;
}

const image::Layer* Catalog::Layer(int index) const {
  if (index < 0 || static_cast<size_t>(index) >= layers.size()) return nullptr;
  return &layers[static_cast<size_t>(index)];
}

std::vector<const Component*> Catalog::Find(ComponentKind kind, std::string_view name) const {
  std::vector<const Component*> out;
  for (const Component& c : components) {
    if (c.kind == kind && (name.empty() || c.name == name)) out.push_back(&c);
  }
  return out;
}

bool IsLibraryKind(ComponentKind kind) {
  return kind == ComponentKind::kCudaLibrary || kind == ComponentKind::kDriverLibrary ||
         kind == ComponentKind::kDriverStub || kind == ComponentKind::kCompatLibrary;
}

bool Catalog::HasCudaStack() const {
  return std::any_of(components.begin(), components.end(), [](const Component& c) {
    switch (c.kind) {
      case ComponentKind::kCudaLibrary:
      case ComponentKind::kDriverLibrary:
      case ComponentKind::kDriverStub:
      case ComponentKind::kCompatLibrary:
      case ComponentKind::kCudaToolkit:
      case ComponentKind::kFramework:
        return !c.deleted;
      default:
        return false;
    }
  });
}

std::vector<const Component*> Catalog::Family(std::string_view family) const {
  std::vector<const Component*> out;
  for (const Component& c : components) {
    if (IsLibraryKind(c.kind) && !c.deleted && c.family == family) out.push_back(&c);
  }
  return out;
}

std::string FrameworkPackageDir(const Component& fw) {
  if (size_t at = fw.path.find("-packages/"); at != std::string::npos) {
    size_t end = fw.path.find('/', at + 10);
    if (end != std::string::npos) return fw.path.substr(0, end);
  }
  return std::string(util::DirName(fw.path));
}

std::string PackageLabel(const Catalog& catalog, std::string_view path) {
  const PackageRef* owner = catalog.Owner(path);
  if (!owner) return "unowned in " + std::string(util::DirName(path));
  std::string label = owner->name + (owner->version.empty() ? "" : " " + owner->version);
  if (owner->manager == PackageManager::kPip) return label;
  return std::string(ManagerName(owner->manager)) + " " + label;
}

std::string Catalog::Requested(const PackageRef& package) const {
  std::string name =
      package.manager == PackageManager::kPip ? NormalizeDistName(package.name) : package.name;
  auto it = requested.find(std::string(ManagerName(package.manager)) + ":" + name);
  return it == requested.end() ? "" : it->second;
}

}  // namespace imgcheck::catalog

#include "catalog/catalog.h"

#include <algorithm>

#include "util/path.h"

namespace imgcheck::catalog {

std::string_view KindName(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kCudaLibrary:
      return "cuda-library";
    case ComponentKind::kDriverLibrary:
      return "driver-library";
    case ComponentKind::kDriverStub:
      return "driver-stub";
    case ComponentKind::kCompatLibrary:
      return "compat-library";
    case ComponentKind::kCudaToolkit:
      return "cuda-toolkit";
    case ComponentKind::kHeader:
      return "header";
    case ComponentKind::kPythonDist:
      return "python-dist";
    case ComponentKind::kFramework:
      return "framework";
    case ComponentKind::kOsPackage:
      return "os-package";
    case ComponentKind::kCondaPackage:
      return "conda-package";
  }
  return "unknown";
}

std::string_view SourceName(VersionSource source) {
  switch (source) {
    case VersionSource::kFilename:
      return "filename";
    case VersionSource::kSoname:
      return "soname";
    case VersionSource::kDpkg:
      return "dpkg";
    case VersionSource::kPipRecord:
      return "pip-record";
    case VersionSource::kPipMetadata:
      return "pip-metadata";
    case VersionSource::kConda:
      return "conda";
    case VersionSource::kHeader:
      return "header";
    case VersionSource::kVersionJson:
      return "version.json";
    case VersionSource::kBuildInfo:
      return "build-info";
    case VersionSource::kEnv:
      return "env";
  }
  return "unknown";
}

std::string_view ManagerName(PackageManager manager) {
  switch (manager) {
    case PackageManager::kDpkg:
      return "dpkg";
    case PackageManager::kPip:
      return "pip";
    case PackageManager::kConda:
      return "conda";
  }
  return "unknown";
}

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

}  // namespace imgcheck::catalog

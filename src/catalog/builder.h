// Catalog::Build's state, shared by the files that fill it: build.cpp (the table of catalogued
// files, image configuration, loader configuration, versions settled), packages.cpp (dpkg, pip
// and conda: components and file ownership), libraries.cpp (libraries and their version
// evidence from names, packages, headers and version.json), frameworks.cpp. Internal to catalog.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "catalog/catalog.h"
#include "catalog/library_rules.h"
#include "catalog/metadata.h"

namespace imgcheck::catalog {

/// True when some directory component of `path` is one of `names`.
bool HasDirComponent(std::string_view path, const std::vector<std::string>& names);

class Builder {
 public:
  Builder(const image::Image& image, const LibraryRules& rules, const util::Limits& limits,
          int jobs, Catalog& cat)
      : image_(image), tree_(image.tree), rules_(rules), limits_(limits), jobs_(jobs), cat_(cat) {}

  void Run();

  // Collectors of the catalogued-file table (build.cpp): each notes a file for a later pass.
  void CollectDpkgDatabase(const std::string& path, const image::Node& node);
  void CollectDpkgList(const std::string& path, const image::Node& node);
  void CollectDpkgMd5sums(const std::string& path, const image::Node& node);
  void CollectDist(const std::string& path, const image::Node& node);
  void CollectConda(const std::string& path, const image::Node& node);
  void CollectCondaHistory(const std::string& path, const image::Node& node);
  void CollectHeader(const std::string& path, const image::Node& node);
  void CollectVersionFile(const std::string& path, const image::Node& node);
  void CollectFramework(const std::string& path, const image::Node& node);

 private:
  struct DistInfo {
    std::string dir;  ///< the *.dist-info / *.egg-info directory
    const image::Node* metadata = nullptr;
    std::string metadata_path;
    const image::Node* record = nullptr;
    std::string record_path;
  };

  // build.cpp
  /// The captured text of a file (the prefix that was kept); nullopt when nothing was.
  /// util::LimitExceeded for a file larger than Limits::metadata_bytes.
  std::optional<std::string_view> Text(const std::string& path, const image::Node& node,
                                       bool need_whole = false);
  /// The text of a line-based metadata file (dpkg status, .list, md5sums, METADATA, RECORD)
  /// whose records, each a line at most, may expand past Limits::metadata_bytes: a short line
  /// becomes a whole record (owner, requirement, missing file). util::LimitExceeded if so.
  std::optional<std::string_view> Records(const std::string& path, const image::Node& node,
                                          bool need_whole = false);
  void Diagnose(std::string path, int layer, std::string message);
  void ReadConfig();
  /// Catalogues one regular file, given what elf::Parse made of it.
  void Visit(const std::string& path, const image::Node& node,
             util::Expected<std::optional<elf::ElfInfo>>& parsed);
  void ReadLoaderConfig();

  // packages.cpp
  /// The canonical path of `path` in the tree (directories' symlinks followed, not the last).
  std::string Canonical(std::string_view path) const;
  void Own(std::string_view path, const PackageRef& owner);
  void ReadDpkg();
  /// Records (Catalog::replaced) the libraries a later layer wrote whose MD5 differs from the
  /// package's md5sums file at `path`.
  void CheckMd5sums(const std::string& path, const DpkgPackage& package);
  void ReadDists();
  void ReadConda();
  /// Catalog::requested, from the package managers' records and the layers' history.
  void ReadIntent();

  // libraries.cpp
  ComponentKind LibraryKind(const Family& f, std::string_view path) const;
  Component* NewLibrary(const std::string& path);
  void AddLibraries();
  void AddDeletedLibraries();
  void AddAliases();
  void AttachUnder(std::string_view family, const std::string& root, const VersionEvidence& e,
                   std::map<size_t, size_t>& claimed);
  void AddHeaders();
  void AddVersionFiles();

  // frameworks.cpp
  void AddFrameworks();

  const image::Image& image_;
  const image::Tree& tree_;
  const LibraryRules& rules_;
  const util::Limits& limits_;
  int jobs_;  ///< threads that parse ELF files
  Catalog& cat_;

  std::vector<std::string> dpkg_databases_;                        // status, status.d/*
  std::vector<std::pair<std::string, std::string>> dpkg_lists_;    // package, list/md5sums path
  std::vector<std::pair<std::string, std::string>> dpkg_md5sums_;  // package, md5sums path
  std::map<std::string, DistInfo> dists_;
  std::vector<std::string> conda_history_;
  std::vector<std::string> conda_, headers_, version_files_, frameworks_;
  std::map<std::string, PackageRef> owners_;  // canonical path -> owning package
  std::map<std::string, size_t> library_at_;  // present library path -> component index
};

}  // namespace imgcheck::catalog

// Catalog::Build: one pass over the merged tree collects ELF headers and the files of the
// catalogued-file table, then packages, libraries and frameworks are assembled (packages.cpp,
// libraries.cpp, frameworks.cpp) and each component's version is settled.
#include <algorithm>

#include "catalog/builder.h"
#include "catalog/metadata.h"
#include "image/layer.h"
#include "util/parallel.h"
#include "util/path.h"

namespace imgcheck::catalog {
namespace {

using image::Node;
using image::NodeType;

constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024;

bool IsCudaVersionFile(std::string_view path) {
  std::string_view dir = util::DirName(path);
  std::string_view name = util::BaseName(path);
  return util::DirName(dir) == "/usr/local" && util::BaseName(dir).starts_with("cuda") &&
         (name == "version.json" || name == "version.txt");
}

/// One kind of file the catalog reads: which paths, how much of each is captured, and which
/// collector notes it for the builder (none: read later through the tree).
struct CataloguedFile {
  bool (*matches)(const LibraryRules& rules, std::string_view path);
  uint64_t limit;
  void (Builder::*collect)(const std::string& path, const Node& node);
};

// First match wins. dpkg's database is the status file, or distroless's status.d (a record per
// package, its files in <package>.md5sums); which files a package owns is in info/<pkg>.list,
// their MD5s in info/<pkg>.md5sums.
// dpkg's MD5s of a package's files: info/<pkg>.md5sums, or distroless's status.d/<pkg>.md5sums.
bool IsMd5sums(std::string_view p) {
  std::string_view dir = util::DirName(p);
  return (dir == "/var/lib/dpkg/info" || dir == "/var/lib/dpkg/status.d") &&
         p.ends_with(".md5sums");
}

constexpr CataloguedFile kCataloguedFiles[] = {
    {[](const LibraryRules&, std::string_view p) { return p == "/var/lib/dpkg/status"; }, 64 * kMiB,
     &Builder::CollectDpkgDatabase},
    {[](const LibraryRules&, std::string_view p) {
       return util::DirName(p) == "/var/lib/dpkg/status.d" && !IsMd5sums(p);
     },
     1 * kMiB, &Builder::CollectDpkgDatabase},
    {[](const LibraryRules&, std::string_view p) {
       return util::DirName(p) == "/var/lib/dpkg/status.d" && IsMd5sums(p);
     },
     1 * kMiB, &Builder::CollectDpkgList},
    {[](const LibraryRules&, std::string_view p) {
       return util::DirName(p) == "/var/lib/dpkg/info" && p.ends_with(".list");
     },
     8 * kMiB, &Builder::CollectDpkgList},
    {[](const LibraryRules&, std::string_view p) {
       return util::DirName(p) == "/var/lib/dpkg/info" && IsMd5sums(p);
     },
     8 * kMiB, &Builder::CollectDpkgMd5sums},
    {[](const LibraryRules&, std::string_view p) {
       std::string_view name = util::BaseName(p);
       return util::DirName(p).ends_with(".dist-info") && (name == "METADATA" || name == "RECORD");
     },
     16 * kMiB, &Builder::CollectDist},
    {[](const LibraryRules&, std::string_view p) {
       return util::DirName(p).ends_with(".egg-info") && util::BaseName(p) == "PKG-INFO";
     },
     1 * kMiB, &Builder::CollectDist},
    {[](const LibraryRules&, std::string_view p) {
       return util::BaseName(util::DirName(p)) == "conda-meta" && p.ends_with(".json");
     },
     32 * kMiB, &Builder::CollectConda},
    {[](const LibraryRules& rules, std::string_view p) {
       return p.ends_with(".h") && rules.ByHeader(util::BaseName(p)) != nullptr;
     },
     2 * kMiB, &Builder::CollectHeader},
    {[](const LibraryRules&, std::string_view p) { return IsCudaVersionFile(p); }, 1 * kMiB,
     &Builder::CollectVersionFile},
    {[](const LibraryRules& rules, std::string_view p) { return rules.Framework(p) != nullptr; },
     1 * kMiB, &Builder::CollectFramework},
    // What was asked for (Catalog::requested): apt's marks, conda's history.
    {[](const LibraryRules&, std::string_view p) { return p == "/var/lib/apt/extended_states"; },
     8 * kMiB, nullptr},
    {[](const LibraryRules&, std::string_view p) {
       return util::BaseName(util::DirName(p)) == "conda-meta" && util::BaseName(p) == "history";
     },
     4 * kMiB, &Builder::CollectCondaHistory},
    {[](const LibraryRules&, std::string_view p) { return p == "/etc/ld.so.preload"; }, 64 * kKiB,
     nullptr},
    {[](const LibraryRules&, std::string_view p) { return p.starts_with("/etc/ld.so.conf"); },
     1 * kMiB, nullptr},
    {[](const LibraryRules&, std::string_view p) { return p == "/etc/ld.so.cache"; }, 64 * kMiB,
     nullptr},
    {[](const LibraryRules&, std::string_view p) {
       return p == "/etc/os-release" || p == "/usr/lib/os-release";
     },
     64 * kKiB, nullptr},
};

const CataloguedFile* FindCatalogued(const LibraryRules& rules, std::string_view path) {
  for (const CataloguedFile& f : kCataloguedFiles) {
    if (f.matches(rules, path)) return &f;
  }
  return nullptr;
}

/// Shared objects (".so" in the name), executables (any x bit) and anything in a
/// bin/sbin/libexec directory.
bool LikelyElf(std::string_view path, uint64_t size, uint32_t mode) {
  if (size < 52) return false;  // smaller than the smallest ELF header
  std::string_view name = util::BaseName(path);
  if (name.find(".so") != std::string_view::npos || (mode & 0111) != 0) return true;
  static const std::vector<std::string> kExecDirs = {"bin", "sbin", "libexec"};
  return HasDirComponent(path, kExecDirs);
}

/// Libraries of a family outside a Python environment: the files whose MD5 IC015 compares with
/// a dpkg md5sums, when a later layer wrote them (DigestRule), and whose SHA-256 an SBOM
/// reading takes (CapturePolicy). Digesting costs a pass over the
/// bytes as they stream (MD5 runs at 0.75 GB/s on a 2-core EPYC, slower than inflating), so the
/// pip wheels' libraries, checked by their RECORD's size, are left out.
bool NeedsMd5(const LibraryRules& rules, std::string_view path) {
  static const std::vector<std::string> kPythonDirs = {"site-packages", "dist-packages"};
  std::string_view name = util::BaseName(path);
  return name.find(".so") != std::string_view::npos &&
         rules.Classify(LibraryBaseName(name)) != nullptr && !HasDirComponent(path, kPythonDirs);
}

/// Trust order of version sources, most trusted first: packages state the exact release.
int Trust(VersionSource s) {
  switch (s) {
    case VersionSource::kDpkg:
      return 0;
    case VersionSource::kPipRecord:
      return 1;
    case VersionSource::kConda:
      return 2;
    case VersionSource::kPipMetadata:
      return 3;
    case VersionSource::kHeader:
      return 4;
    case VersionSource::kVersionJson:
      return 5;
    case VersionSource::kBuildInfo:
      return 6;
    case VersionSource::kFilename:
      return 7;
    case VersionSource::kSoname:
      return 8;
    case VersionSource::kEnv:
      return 9;
  }
  return 10;
}

/// Orders the evidences by trust and picks the most precise one as the version.
void SettleVersion(Component& c) {
  std::stable_sort(c.versions.begin(), c.versions.end(),
                   [](const VersionEvidence& a, const VersionEvidence& b) {
                     return Trust(a.source) < Trust(b.source);
                   });
  int best = -1;
  for (const VersionEvidence& e : c.versions) {
    int p = VersionPrecision(e.value);
    // Equal precision: a value that extends the chosen one says more ("2.3.0+cu121").
    bool extends = p == best && e.value.size() > c.version.size() && e.value.starts_with(c.version);
    if (p > best || extends) {
      best = p;
      c.version = e.value;
    }
  }
}

}  // namespace

bool HasDirComponent(std::string_view path, const std::vector<std::string>& names) {
  std::vector<std::string> parts = util::Split(util::DirName(path), '/');
  for (const std::string& p : parts) {
    if (std::find(names.begin(), names.end(), p) != names.end()) return true;
  }
  return false;
}

void Builder::Run() {
  cat_.layers = image_.layers;
  ReadConfig();
  // Parsing ELF files is most of a catalog: `jobs_` threads parse, the visits keep the tree's
  // order (the same catalog, diagnostics and first limit as one thread).
  std::vector<std::pair<const std::string*, const Node*>> files;
  for (const auto& [path, node] : tree_.nodes())
    if (node.type == NodeType::kRegular && node.content) files.emplace_back(&path, &node);
  std::vector<util::Expected<std::optional<elf::ElfInfo>>> parsed(files.size(),
                                                                  std::optional<elf::ElfInfo>());
  util::ParallelFor(files.size(), jobs_, [&](size_t i) {
    parsed[i] = elf::Parse(*files[i].second->content, {limits_.elf_table_bytes});
  });
  for (size_t i = 0; i < files.size(); ++i) Visit(*files[i].first, *files[i].second, parsed[i]);
  ReadDpkg();
  ReadDists();
  ReadConda();
  ReadIntent();
  // Every ELF file's owner, so a consumer is named by its package ("flash-attn 2.5.8").
  for (const auto& [path, elf] : cat_.elves())
    if (auto it = owners_.find(path); it != owners_.end())
      cat_.mutable_owners().emplace(path, it->second);
  AddLibraries();
  AddDeletedLibraries();
  AddAliases();
  AddHeaders();
  AddVersionFiles();
  AddFrameworks();
  ReadLoaderConfig();
  for (Component& c : cat_.components) SettleVersion(c);
  for (Component& c : cat_.packages) SettleVersion(c);
}

std::optional<std::string_view> Builder::Text(const std::string& path, const Node& node,
                                              bool need_whole) {
  if (node.size > limits_.metadata_bytes)
    util::LimitExceeded(path + " (" + std::to_string(node.size) + " bytes)",
                        util::MiBText(limits_.metadata_bytes), "--max-metadata-mb");
  if (node.size == 0) return std::string_view{};
  if (!node.content) return std::nullopt;
  std::optional<std::string_view> text = node.content->ViewFrom(0);
  if (!text) return std::nullopt;
  if (text->size() < node.size) {
    Diagnose(path, node.layer,
             "only the first " + std::to_string(text->size()) + " of " + std::to_string(node.size) +
                 " bytes were read");
    if (need_whole) return std::nullopt;
  }
  return text;
}

std::optional<std::string_view> Builder::Records(const std::string& path, const Node& node,
                                                 bool need_whole) {
  // The most one line can cost once parsed: the largest record (an owner entry in a map, a
  // Requirement) without its strings, which the text's own size accounts for.
  constexpr uint64_t kRecordBytes = 256;
  std::optional<std::string_view> text = Text(path, node, need_whole);
  if (!text) return text;
  uint64_t lines = static_cast<uint64_t>(std::count(text->begin(), text->end(), '\n')) + 1;
  if (text->size() + lines * kRecordBytes > limits_.metadata_bytes)
    util::LimitExceeded("the records of " + path + " (" + std::to_string(lines) + " lines)",
                        util::MiBText(limits_.metadata_bytes), "--max-metadata-mb");
  return text;
}

void Builder::Diagnose(std::string path, int layer, std::string message) {
  cat_.diagnostics.push_back({std::move(path), layer, std::move(message)});
}

void Builder::ReadConfig() {
  for (const std::string& kv : image_.config.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) {
      cat_.config.env.emplace_back(kv, "");
    } else {
      cat_.config.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  cat_.config.labels = image_.config.labels;
  for (std::string_view p : {"/etc/os-release", "/usr/lib/os-release"}) {
    std::optional<image::Tree::Resolved> r = tree_.Resolve(p);
    if (!r || r->node == nullptr || r->node->type != NodeType::kRegular) continue;
    std::optional<std::string_view> text = Text(r->path, *r->node);
    if (!text) continue;
    cat_.config.os_release = ParseOsRelease(*text);
    cat_.config.os_release_path = r->path;
    cat_.config.os_release_layer = r->node->layer;
    break;
  }
}

void Builder::Visit(const std::string& path, const Node& node,
                    util::Expected<std::optional<elf::ElfInfo>>& parsed) {
  if (parsed && *parsed && (*parsed)->table_limit_reached)
    util::LimitExceeded("the dynamic tables of " + path, util::MiBText(limits_.elf_table_bytes),
                        "--max-elf-table-mb");
  if (!parsed) {
    Diagnose(path, node.layer, "corrupt ELF: " + parsed.error().message);
  } else if (parsed->has_value()) {
    // A dependency or search path it could not read is one the loader does not know of.
    const std::vector<std::string>& unread = (*parsed)->names_unread;
    if (!unread.empty())
      Diagnose(
          path, node.layer,
          "dynamic section not read whole: " + unread.front() +
              (unread.size() > 1 ? " (and " + std::to_string(unread.size() - 1) + " more)" : ""));
    cat_.mutable_elves().emplace(path, std::move(**parsed));
    return;
  }
  const CataloguedFile* f = FindCatalogued(rules_, path);
  if (f != nullptr && f->collect != nullptr) (this->*(f->collect))(path, node);
}

void Builder::CollectDpkgDatabase(const std::string& path, const Node&) {
  dpkg_databases_.push_back(path);
}

namespace {
// "libfoo:amd64.list" -> "libfoo".
std::string DpkgPackageOf(std::string_view path) {
  std::string_view name = util::BaseName(path);
  std::string package(name.substr(0, name.rfind('.')));
  return package.substr(0, package.find(':'));
}
}  // namespace

void Builder::CollectDpkgList(const std::string& path, const Node& node) {
  dpkg_lists_.emplace_back(DpkgPackageOf(path), path);
  if (path.ends_with(".md5sums")) CollectDpkgMd5sums(path, node);  // status.d: both in one
}

void Builder::CollectDpkgMd5sums(const std::string& path, const Node&) {
  dpkg_md5sums_.emplace_back(DpkgPackageOf(path), path);
}

void Builder::CollectDist(const std::string& path, const Node& node) {
  std::string dir(util::DirName(path));
  DistInfo& d = dists_[dir];
  d.dir = dir;
  if (util::BaseName(path) == "RECORD") {
    d.record = &node;
    d.record_path = path;
  } else {
    d.metadata = &node;
    d.metadata_path = path;
  }
}

void Builder::CollectConda(const std::string& path, const Node&) { conda_.push_back(path); }
void Builder::CollectCondaHistory(const std::string& path, const Node&) {
  conda_history_.push_back(path);
}
void Builder::CollectHeader(const std::string& path, const Node&) { headers_.push_back(path); }
void Builder::CollectVersionFile(const std::string& path, const Node&) {
  version_files_.push_back(path);
}
void Builder::CollectFramework(const std::string& path, const Node&) {
  frameworks_.push_back(path);
}

void Builder::ReadLoaderConfig() {
  if (tree_.Resolve("/etc/ld.so.conf").value_or(image::Tree::Resolved{"", nullptr}).node) {
    cat_.config.ld_so_conf = ReadLdSoConf(tree_, limits_);
    for (util::Diagnostic& d : cat_.config.ld_so_conf.diagnostics) cat_.diagnostics.push_back(d);
  }
  std::optional<image::Tree::Resolved> r = tree_.Resolve("/etc/ld.so.cache");
  if (!r || r->node == nullptr || r->node->type != NodeType::kRegular) return;
  cat_.config.ld_so_cache_path = r->path;
  cat_.config.ld_so_cache_layer = r->node->layer;
  std::optional<std::string_view> bytes = Text(r->path, *r->node, true);
  if (!bytes) return;
  util::Expected<LdCacheFile> cache = ParseLdCache(*bytes, limits_);
  if (!cache) {
    Diagnose(r->path, r->node->layer, "ld.so.cache: " + cache.error().message);
    return;
  }
  cat_.config.ld_so_cache = std::move(*cache);
}

image::CapturePolicy CapturePolicy(const LibraryRules& rules, bool sbom_hashes) {
  auto owned = std::make_shared<const LibraryRules>(rules);
  return [owned, sbom_hashes](std::string_view path, uint64_t size,
                              uint32_t mode) -> std::unique_ptr<image::Capturer> {
    if (const CataloguedFile* f = FindCatalogued(*owned, path))
      return image::CapturePrefix(f->limit);
    if (!LikelyElf(path, size, mode)) return nullptr;
    // The SBOM's hash of a library outside any Python environment (the files a generic purl
    // names); a pass over its bytes, so only when an SBOM is asked for.
    if (sbom_hashes && NeedsMd5(*owned, path)) return image::CaptureWithSha256(elf::MakeCapturer());
    return elf::MakeCapturer();
  };
}

std::string CapturePolicyId(const LibraryRules& rules, bool sbom_hashes) {
  // Bump the number when the code's table of catalogued files changes. 6: the MD5 is the
  // reading's DigestPlan's (DigestRule), no longer every family library's; and the symbol
  // tables IC013's binding reads are captured. 7: the strings of a .dynstr that patchelf moved
  // into a large PT_LOAD at the end of the file are hashed (libcusparseLt.so.0). 8: the hashed
  // strings that may be the dynamic section's names are kept whole (libtensorflow_framework.so.2).
  return "catalog-capture-8:" + rules.CaptureDigest() + (sbom_hashes ? ":sha256" : "");
}

image::DigestRule DigestRule(const LibraryRules& rules) {
  auto owned = std::make_shared<const LibraryRules>(rules);
  image::DigestRule rule;
  rule.candidate = [owned](std::string_view path) { return NeedsMd5(*owned, path); };
  rule.stated = [owned](const image::LayerContents& layer, const image::Tree& tree) {
    std::vector<std::string> paths;
    for (const image::LayerEntry& e : layer.entries) {
      if (e.kind != image::EntryKind::kFile || !e.content || !IsMd5sums(e.path)) continue;
      std::optional<std::string_view> text = e.content->ViewFrom(0);
      if (!text) continue;
      for (Md5sumsLibrary& line : ParseMd5sumsLibraries(*text)) {
        if (!NeedsMd5(*owned, line.path)) continue;
        // The file a later layer writes may be reached through a directory link (/lib ->
        // usr/lib): CheckMd5sums resolves the md5sums path in the merged tree.
        std::optional<image::Tree::Resolved> r = tree.Resolve(line.path);
        if (r && r->path != line.path && NeedsMd5(*owned, r->path)) paths.push_back(r->path);
        paths.push_back(std::move(line.path));
      }
    }
    return paths;
  };
  return rule;
}

Catalog Build(const image::Image& image, const LibraryRules& rules, const util::Limits& limits,
              int jobs) {
  Catalog cat;
  Builder(image, rules, limits, jobs, cat).Run();
  return cat;
}

}  // namespace imgcheck::catalog

// Catalog::Build: one pass over the merged tree collects ELF headers and metadata files, then
// libraries, packages and frameworks are assembled and each library gets every version
// evidence there is.
#include <algorithm>
#include <set>

#include "catalog/catalog.h"
#include "catalog/library_rules.h"
#include "catalog/metadata.h"
#include "util/path.h"

namespace imgcheck::catalog {
namespace {

using image::Node;
using image::NodeType;

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;

/// True when some directory component of `path` is one of `names`.
bool HasDirComponent(std::string_view path, const std::vector<std::string>& names) {
  std::vector<std::string> parts = util::Split(util::DirName(path), '/');
  for (const std::string& p : parts) {
    if (std::find(names.begin(), names.end(), p) != names.end()) return true;
  }
  return false;
}

// Framework build files, by path suffix: which framework each describes.
struct FrameworkFile {
  std::string_view suffix;  ///< glob on the path's end, matched component-wise
  std::string_view name;    ///< framework name when the file does not say
  bool json = false;
};
constexpr FrameworkFile kFrameworkFiles[] = {
    {"torch/version.py", "torch"},
    {"tensorflow/python/platform/build_info.py", "tensorflow"},
    {"tensorflow_core/python/platform/build_info.py", "tensorflow"},
    {"jax/version.py", "jax"},
    {"jaxlib/version.py", "jaxlib"},
    {"jax_cuda*_plugin/version.py", ""},  // name from the directory: jax-cuda12-plugin
    {"jax_plugins/xla_cuda*/version.py", ""},
    {"onnxruntime/capi/build_and_package_info.py", "onnxruntime"},
    {"cupy/.data/_wheel.json", "cupy", true},
};

/// The framework file `path` is, or null.
const FrameworkFile* MatchFramework(std::string_view path) {
  for (const FrameworkFile& f : kFrameworkFiles) {
    size_t parts = static_cast<size_t>(std::count(f.suffix.begin(), f.suffix.end(), '/')) + 1;
    // The last `parts` components of `path`.
    size_t start = path.size();
    for (size_t i = 0; i < parts && start != std::string_view::npos; ++i) {
      start = start == 0 ? std::string_view::npos : path.rfind('/', start - 1);
    }
    if (start == std::string_view::npos) continue;
    if (util::GlobMatch(f.suffix, path.substr(start + 1))) return &f;
  }
  return nullptr;
}

bool IsCudaVersionFile(std::string_view path) {
  std::string_view dir = util::DirName(path);
  std::string_view name = util::BaseName(path);
  return util::DirName(dir) == "/usr/local" && util::BaseName(dir).starts_with("cuda") &&
         (name == "version.json" || name == "version.txt");
}

/// How much of a metadata file the catalog keeps; 0 when it does not read the file.
uint64_t MetadataLimit(std::string_view path) {
  std::string_view name = util::BaseName(path);
  std::string_view dir = util::DirName(path);
  if (path == "/var/lib/dpkg/status") return 64 * kMiB;
  if (dir == "/var/lib/dpkg/info" && name.ends_with(".list")) return 8 * kMiB;
  if (dir == "/var/lib/dpkg/status.d") return 1 * kMiB;
  if (dir.ends_with(".dist-info") && (name == "METADATA" || name == "RECORD")) return 16 * kMiB;
  if (dir.ends_with(".egg-info") && name == "PKG-INFO") return 1 * kMiB;
  if (util::BaseName(dir) == "conda-meta" && name.ends_with(".json")) return 32 * kMiB;
  // The version headers of rules/libraries.json ("headers"); the policy runs before the rules
  // are read, so it keeps every name those globs could match.
  if (name.ends_with(".h") &&
      (name.starts_with("cudnn_version") || name == "cudnn.h" || name == "cuda_runtime_api.h")) {
    return 2 * kMiB;
  }
  if (IsCudaVersionFile(path)) return 1 * kMiB;
  if (MatchFramework(path) != nullptr) return 1 * kMiB;
  if (path.starts_with("/etc/ld.so.conf")) return 1 * kMiB;
  if (path == "/etc/ld.so.cache") return 64 * kMiB;
  if (path == "/etc/os-release" || path == "/usr/lib/os-release") return 64 * kKiB;
  return 0;
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

std::string Major(std::string_view version) {
  return std::string(version.substr(0, version.find('.')));
}

struct DistInfo {
  std::string dir;  ///< the *.dist-info / *.egg-info directory
  const Node* metadata = nullptr;
  std::string metadata_path;
  const Node* record = nullptr;
  std::string record_path;
};

struct HeaderFact {
  const Family* family;
  std::string path, prefix, version;
  int layer;
};

struct VersionFileFact {
  std::string path, root;
  int layer;
  std::map<std::string, std::string> versions;  ///< version.json keys (version.txt: "cuda")
};

class Builder {
 public:
  Builder(const image::Image& image, const LibraryRules& rules, Catalog& cat)
      : image_(image), tree_(image.tree), rules_(rules), cat_(cat) {}

  void Run() {
    cat_.layers = image_.layers;
    ReadConfig();
    for (const auto& [path, node] : tree_.nodes()) Visit(path, node);
    ReadDpkg();
    ReadDists();
    ReadConda();
    AddLibraries();
    AddDeletedLibraries();
    AddAliases();
    AddHeaders();
    AddVersionFiles();
    AddFrameworks();
    ReadLoaderConfig();
    for (Component& c : cat_.components) SettleVersion(c);
  }

 private:
  /// The captured text of a file (the prefix that was kept); nullopt when nothing was.
  std::optional<std::string_view> Text(const std::string& path, const Node& node,
                                       bool need_whole = false) {
    if (node.size == 0) return std::string_view{};
    if (!node.content) return std::nullopt;
    std::optional<std::string_view> text = node.content->ViewFrom(0);
    if (!text) return std::nullopt;
    if (text->size() < node.size) {
      Diagnose(path, node.layer,
               "only the first " + std::to_string(text->size()) + " of " +
                   std::to_string(node.size) + " bytes were read");
      if (need_whole) return std::nullopt;
    }
    return text;
  }

  void Diagnose(std::string path, int layer, std::string message) {
    cat_.diagnostics.push_back({std::move(path), layer, std::move(message)});
  }

  void ReadConfig() {
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

  void Visit(const std::string& path, const Node& node) {
    if (node.type != NodeType::kRegular || !node.content) return;
    std::string_view name = util::BaseName(path);
    std::string_view dir = util::DirName(path);
    util::Expected<std::optional<elf::ElfInfo>> parsed = elf::Parse(*node.content);
    if (!parsed) {
      Diagnose(path, node.layer, "corrupt ELF: " + parsed.error().message);
    } else if (parsed->has_value()) {
      cat_.mutable_elves().emplace(path, std::move(**parsed));
      return;
    }
    // dpkg's database: the status file, or distroless's status.d (a record per package, its
    // files in <package>.md5sums); which files a package owns in info/<package>.list.
    bool status_d = dir == "/var/lib/dpkg/status.d";
    if (path == "/var/lib/dpkg/status" || (status_d && !name.ends_with(".md5sums"))) {
      dpkg_databases_.push_back(path);
    } else if ((dir == "/var/lib/dpkg/info" && name.ends_with(".list")) ||
               (status_d && name.ends_with(".md5sums"))) {
      std::string package(name.substr(0, name.rfind('.')));
      package = package.substr(0, package.find(':'));  // "libfoo:amd64.list"
      dpkg_lists_.emplace_back(package, path);
    } else if (dir.ends_with(".dist-info") || dir.ends_with(".egg-info")) {
      DistInfo& d = dists_[std::string(dir)];
      d.dir = std::string(dir);
      if (name == "METADATA" || name == "PKG-INFO") {
        d.metadata = &node;
        d.metadata_path = path;
      } else if (name == "RECORD") {
        d.record = &node;
        d.record_path = path;
      }
    } else if (util::BaseName(dir) == "conda-meta" && name.ends_with(".json")) {
      conda_.push_back(path);
    } else if (const Family* f = rules_.ByHeader(name); f != nullptr && name.ends_with(".h")) {
      headers_.push_back(path);
      (void)f;
    } else if (IsCudaVersionFile(path)) {
      version_files_.push_back(path);
    } else if (MatchFramework(path) != nullptr) {
      frameworks_.push_back(path);
    }
  }

  // --- package databases -------------------------------------------------------------------

  /// The canonical path of `path` in the tree (directories' symlinks followed, not the last).
  std::string Canonical(std::string_view path) {
    std::optional<image::Tree::Resolved> r = tree_.Resolve(path, /*follow_last=*/false);
    return r ? r->path : util::NormalizePath(path);
  }

  void Own(std::string_view path, const PackageRef& owner) {
    owners_.emplace(Canonical(path), owner);
  }

  /// dpkg packages are components when some family or the CUDA repository names them.
  bool CudaPackage(PackageManager m, std::string_view name) const {
    return rules_.ByPackage(m, name) != nullptr || name.starts_with("cuda-") ||
           name.starts_with("cuda_") || name == "cudatoolkit";
  }

  void ReadDpkg() {
    std::map<std::string, DpkgPackage> packages;
    for (const std::string& db : dpkg_databases_) {
      const Node* node = tree_.Find(db);
      std::optional<std::string_view> text = Text(db, *node);
      if (!text) continue;
      bool status_d = db != "/var/lib/dpkg/status";
      for (DpkgPackage& p : ParseDpkgStatus(*text)) {
        // "install ok installed", "hold ok installed": the last word is the state. status.d
        // records carry no Status: the package is installed.
        if (!p.status.ends_with(" installed") && !(status_d && p.status.empty())) continue;
        std::string name = p.name;
        if (CudaPackage(PackageManager::kDpkg, name)) {
          Component c;
          c.kind = ComponentKind::kOsPackage;
          c.name = name;
          if (const Family* f = rules_.ByPackage(PackageManager::kDpkg, name)) c.family = f->family;
          c.path = db;
          c.layer = node->layer;
          c.status = p.status;
          c.held = p.status.starts_with("hold ");
          c.versions.push_back(
              {UpstreamVersion(p.version), VersionSource::kDpkg, db, node->layer, p.version});
          cat_.components.push_back(std::move(c));
        }
        packages.emplace(name, std::move(p));
      }
    }
    for (const auto& [package, list_path] : dpkg_lists_) {
      auto it = packages.find(package);
      if (it == packages.end()) continue;
      const Node* node = tree_.Find(list_path);
      std::optional<std::string_view> text = Text(list_path, *node);
      if (!text) continue;
      PackageRef owner{PackageManager::kDpkg, package, it->second.version, list_path, node->layer};
      for (const std::string& line : util::Split(*text, '\n')) {
        std::string file;
        if (!line.empty() && line.front() == '/')
          file = line;  // info/*.list: "/usr/lib/x"
        else if (size_t sep = line.find("  "); sep != std::string::npos)
          file = "/" + line.substr(sep + 2);  // status.d/*.md5sums: "<md5>  usr/lib/x"
        if (!file.empty() && file != "/.") Own(file, owner);
      }
    }
  }

  void ReadDists() {
    for (auto& [dir, d] : dists_) {
      Component c;
      c.kind = ComponentKind::kPythonDist;
      c.path = dir;
      DistMetadata meta;
      int meta_layer = -1;
      if (d.metadata != nullptr) {
        if (std::optional<std::string_view> text = Text(d.metadata_path, *d.metadata)) {
          meta = ParseDistMetadata(*text);
        }
        meta_layer = d.metadata->layer;
        c.layer = meta_layer;
      }
      if (meta.name.empty()) {
        // "torch-2.1.0.dist-info": the name is before the first '-'.
        std::string_view base = util::BaseName(dir);
        meta.name = std::string(base.substr(0, base.find('-')));
        if (meta.version.empty() && base.find('-') != std::string_view::npos) {
          std::string_view rest = base.substr(base.find('-') + 1);
          meta.version = std::string(rest.substr(0, rest.rfind('.')));
        }
      }
      c.name = NormalizeDistName(meta.name);
      if (const Family* f = rules_.ByPackage(PackageManager::kPip, c.name)) c.family = f->family;
      if (!meta.version.empty()) {
        c.versions.push_back({meta.version, VersionSource::kPipMetadata,
                              d.metadata ? d.metadata_path : dir, meta_layer, ""});
      }
      c.requires_dist = std::move(meta.requires_dist);
      if (d.record != nullptr) {
        if (c.layer < 0) c.layer = d.record->layer;
        if (std::optional<std::string_view> text = Text(d.record_path, *d.record, true)) {
          PackageRef owner{PackageManager::kPip, c.name, meta.version, d.record_path,
                           d.record->layer};
          std::string site = std::string(util::DirName(dir));
          for (const std::string& entry : ParseRecord(*text)) {
            std::string abs = util::JoinPath(site, entry);
            std::optional<image::Tree::Resolved> r = tree_.Resolve(abs);
            if (!r || r->node == nullptr) {
              c.missing_files.push_back(abs);
              continue;
            }
            Own(abs, owner);
          }
        }
      }
      cat_.components.push_back(std::move(c));
    }
  }

  void ReadConda() {
    for (const std::string& path : conda_) {
      const Node* node = tree_.Find(path);
      std::optional<std::string_view> text = Text(path, *node, true);
      if (!text) continue;
      util::Expected<CondaPackage> p = ParseCondaMeta(*text);
      if (!p) {
        Diagnose(path, node->layer, p.error().message);
        continue;
      }
      std::string prefix(util::DirName(util::DirName(path)));
      PackageRef owner{PackageManager::kConda, p->name, p->version, path, node->layer};
      for (const std::string& f : p->files) Own(util::JoinPath(prefix, f), owner);
      if (!CudaPackage(PackageManager::kConda, p->name)) continue;
      Component c;
      c.kind = ComponentKind::kCondaPackage;
      c.name = p->name;
      if (const Family* f = rules_.ByPackage(PackageManager::kConda, c.name)) c.family = f->family;
      c.path = path;
      c.layer = node->layer;
      c.versions.push_back({p->version, VersionSource::kConda, path, node->layer, p->build});
      cat_.components.push_back(std::move(c));
    }
  }

  // --- libraries ---------------------------------------------------------------------------

  ComponentKind LibraryKind(const Family& f, std::string_view path) const {
    if (HasDirComponent(path, rules_.stub_dirs)) return ComponentKind::kDriverStub;
    if (f.kind == ComponentKind::kDriverLibrary && HasDirComponent(path, rules_.compat_dirs)) {
      return ComponentKind::kCompatLibrary;
    }
    return f.kind;
  }

  /// A library component for `path` with what its name says; null when it is no library.
  Component* NewLibrary(const std::string& path) {
    std::string_view name = util::BaseName(path);
    std::string_view base = LibraryBaseName(name);
    if (base.empty()) return nullptr;
    const Family* f = rules_.Classify(base);
    if (f == nullptr) return nullptr;
    Component c;
    c.kind = LibraryKind(*f, path);
    c.name = std::string(base);
    c.family = f->family;
    c.path = path;
    cat_.components.push_back(std::move(c));
    return &cat_.components.back();
  }

  void AddLibraries() {
    for (const auto& [path, node] : tree_.nodes()) {
      if (node.type != NodeType::kRegular) continue;
      Component* c = NewLibrary(path);
      if (c == nullptr) continue;
      c->layer = node.layer;
      c->overwritten_layers = node.history;
      if (std::string v = FilenameVersion(util::BaseName(path)); !v.empty()) {
        c->versions.push_back({v, VersionSource::kFilename, path, node.layer, ""});
      }
      if (const elf::ElfInfo* info = cat_.Elf(path)) {
        LibraryFacts facts;
        facts.soname = info->soname;
        facts.needed = info->needed;
        facts.machine = info->machine;
        facts.is64 = info->is64;
        std::set<unsigned> sass, ptx;
        for (const elf::FatbinEntry& e : info->fatbin) {
          (e.kind == elf::FatbinEntry::Kind::kCubin ? sass : ptx).insert(e.sm);
        }
        facts.sass_sm.assign(sass.begin(), sass.end());
        facts.ptx_sm.assign(ptx.begin(), ptx.end());
        c->elf = std::move(facts);
        if (std::string v = FilenameVersion(info->soname); !v.empty()) {
          c->versions.push_back({v, VersionSource::kSoname, path, node.layer, info->soname});
        }
      }
      auto owner = owners_.find(Canonical(path));
      if (owner != owners_.end()) {
        c->owner = owner->second;
        const PackageRef& o = owner->second;
        // Only the family's own package states the library's version (torch owning a bundled
        // libcudnn.so.8 says nothing about cuDNN's).
        if (rules_.ByPackage(o.manager, o.name) == rules_.Classify(c->name)) {
          static constexpr VersionSource kBy[] = {VersionSource::kDpkg, VersionSource::kPipRecord,
                                                  VersionSource::kConda};
          std::string v =
              o.manager == PackageManager::kDpkg ? UpstreamVersion(o.version) : o.version;
          c->versions.push_back({v, kBy[static_cast<int>(o.manager)], o.metadata, o.layer,
                                 o.version == v ? "" : o.version});
        }
      }
      library_at_[path] = cat_.components.size() - 1;
    }
  }

  void AddDeletedLibraries() {
    for (const auto& [path, deletion] : tree_.deleted()) {
      if (deletion.type != NodeType::kRegular) continue;
      Component* c = NewLibrary(path);
      if (c == nullptr) continue;
      c->deleted = true;
      c->layer = deletion.layer;
      c->overwritten_layers = deletion.history;
      int wrote = deletion.history.empty() ? -1 : deletion.history.back();
      if (std::string v = FilenameVersion(util::BaseName(path)); !v.empty()) {
        c->versions.push_back({v, VersionSource::kFilename, path, wrote, ""});
      }
    }
  }

  void AddAliases() {
    for (const auto& [path, node] : tree_.nodes()) {
      if (node.type != NodeType::kSymlink) continue;
      std::optional<image::Tree::Resolved> r = tree_.Resolve(path);
      if (!r) continue;
      auto it = library_at_.find(r->path);
      if (it != library_at_.end()) cat_.components[it->second].aliases.push_back(path);
    }
  }

  /// Adds `evidence` to the present libraries of `family` under `root` whose major agrees,
  /// unless a deeper root (a closer header) claims them: `claimed` keeps the depth per library.
  void AttachUnder(std::string_view family, const std::string& root, const VersionEvidence& e,
                   std::map<size_t, size_t>& claimed) {
    std::string prefix = root == "/" ? "/" : root + "/";
    for (const auto& [path, index] : library_at_) {
      Component& c = cat_.components[index];
      if (c.family != family || !path.starts_with(prefix)) continue;
      std::string file_major;
      for (const VersionEvidence& v : c.versions) {
        if (v.source == VersionSource::kFilename || v.source == VersionSource::kSoname) {
          file_major = Major(v.value);
          break;
        }
      }
      if (!file_major.empty() && file_major != Major(e.value)) continue;
      auto [it, fresh] = claimed.emplace(index, root.size());
      if (!fresh) {
        if (it->second >= root.size()) continue;
        // A deeper root wins: drop the shallower evidence of the same source.
        std::erase_if(c.versions, [&](const VersionEvidence& v) { return v.source == e.source; });
        it->second = root.size();
      }
      c.versions.push_back(e);
    }
  }

  void AddHeaders() {
    std::map<size_t, size_t> claimed;
    // Deepest headers last, so that AttachUnder's replacement sees them win.
    std::vector<HeaderFact> facts;
    for (const std::string& path : headers_) {
      const Node* node = tree_.Find(path);
      const Family* f = rules_.ByHeader(util::BaseName(path));
      std::optional<std::string_view> text = Text(path, *node);
      if (!text) continue;
      std::optional<std::string> v =
          f->family == "cudart" ? CudartHeaderVersion(*text) : CudnnHeaderVersion(*text);
      if (!v) continue;
      // The install prefix: what comes before the "include" directory.
      std::string root = path;
      size_t inc = path.rfind("/include/");
      root = inc == std::string::npos ? std::string(util::DirName(path)) : path.substr(0, inc);
      if (root.empty()) root = "/";
      Component c;
      c.kind = ComponentKind::kHeader;
      c.name = std::string(util::BaseName(path));
      c.family = f->family;
      c.path = path;
      c.layer = node->layer;
      c.overwritten_layers = node->history;
      VersionEvidence e{*v, VersionSource::kHeader, path, node->layer, ""};
      c.versions.push_back(e);
      cat_.components.push_back(std::move(c));
      facts.push_back({f, path, root, *v, node->layer});
    }
    for (const HeaderFact& h : facts) {
      AttachUnder(h.family->family, h.prefix,
                  {h.version, VersionSource::kHeader, h.path, h.layer, ""}, claimed);
    }
  }

  void AddVersionFiles() {
    std::map<size_t, size_t> claimed;
    for (const std::string& path : version_files_) {
      const Node* node = tree_.Find(path);
      std::optional<std::string_view> text = Text(path, *node, true);
      if (!text) continue;
      std::map<std::string, std::string> versions;
      if (path.ends_with(".json")) {
        util::Expected<std::map<std::string, std::string>> parsed = ParseCudaVersionJson(*text);
        if (!parsed) {
          Diagnose(path, node->layer, parsed.error().message);
          continue;
        }
        versions = std::move(*parsed);
      } else if (std::optional<std::string> v = ParseCudaVersionTxt(*text)) {
        versions["cuda"] = *v;
      }
      if (versions.empty()) continue;
      Component c;
      c.kind = ComponentKind::kCudaToolkit;
      c.name = "cuda";
      c.path = path;
      c.layer = node->layer;
      c.overwritten_layers = node->history;
      if (versions.count("cuda")) {
        c.versions.push_back(
            {versions["cuda"], VersionSource::kVersionJson, path, node->layer, ""});
      }
      for (const auto& [k, v] : versions) c.build[k] = v;
      cat_.components.push_back(std::move(c));
      std::string root(util::DirName(path));
      for (const Family& f : rules_.families) {
        for (const std::string& key : f.version_json) {
          auto it = versions.find(key);
          if (it == versions.end()) continue;
          AttachUnder(f.family, root,
                      {it->second, VersionSource::kVersionJson, path, node->layer, key}, claimed);
        }
      }
    }
  }

  // --- frameworks --------------------------------------------------------------------------

  void AddFrameworks() {
    for (const std::string& path : frameworks_) {
      const Node* node = tree_.Find(path);
      const FrameworkFile* f = MatchFramework(path);
      std::optional<std::string_view> text = Text(path, *node, f->json);
      if (!text) continue;
      Component c;
      c.kind = ComponentKind::kFramework;
      c.path = path;
      c.layer = node->layer;
      c.overwritten_layers = node->history;
      if (f->json) {
        util::Expected<BuildFacts> facts = ParseCupyWheelJson(*text);
        if (!facts) {
          Diagnose(path, node->layer, facts.error().message);
          continue;
        }
        c.build = std::move(*facts);
      } else {
        c.build = ParsePythonLiterals(*text);
      }
      c.name = std::string(f->name);
      if (c.name.empty()) {  // jax_cuda12_plugin/version.py -> jax-cuda12-plugin
        c.name = NormalizeDistName(util::BaseName(util::DirName(path)));
      }
      if (auto it = c.build.find("package_name"); it != c.build.end()) c.name = it->second;
      // TF1 names its facts *_number; offer them under the TF2 keys too.
      for (std::string_view key : {"cuda_version", "cudnn_version"}) {
        auto tf1 = c.build.find(std::string(key) + "_number");
        if (tf1 != c.build.end() && !c.build.count(key)) c.build[std::string(key)] = tf1->second;
      }
      for (std::string_view key : {"__version__", "_version"}) {
        auto it = c.build.find(key);
        if (it != c.build.end() && VersionPrecision(it->second) > 0) {
          c.versions.push_back(
              {it->second, VersionSource::kBuildInfo, path, node->layer, std::string(key)});
          break;
        }
      }
      auto owner = owners_.find(Canonical(path));
      if (owner != owners_.end()) {
        c.owner = owner->second;
        c.versions.push_back({owner->second.version, VersionSource::kPipRecord,
                              owner->second.metadata, owner->second.layer, owner->second.name});
      }
      cat_.components.push_back(std::move(c));
    }
  }

  void ReadLoaderConfig() {
    if (tree_.Resolve("/etc/ld.so.conf").value_or(image::Tree::Resolved{"", nullptr}).node) {
      cat_.config.ld_so_conf = ReadLdSoConf(tree_);
      for (util::Diagnostic& d : cat_.config.ld_so_conf.diagnostics) cat_.diagnostics.push_back(d);
    }
    std::optional<image::Tree::Resolved> r = tree_.Resolve("/etc/ld.so.cache");
    if (!r || r->node == nullptr || r->node->type != NodeType::kRegular) return;
    cat_.config.ld_so_cache_path = r->path;
    cat_.config.ld_so_cache_layer = r->node->layer;
    std::optional<std::string_view> bytes = Text(r->path, *r->node, true);
    if (!bytes) return;
    util::Expected<LdCacheFile> cache = ParseLdCache(*bytes);
    if (!cache) {
      Diagnose(r->path, r->node->layer, "ld.so.cache: " + cache.error().message);
      return;
    }
    cat_.config.ld_so_cache = std::move(*cache);
  }

  const image::Image& image_;
  const image::Tree& tree_;
  const LibraryRules& rules_;
  Catalog& cat_;

  std::vector<std::string> dpkg_databases_;                      // status, status.d/*
  std::vector<std::pair<std::string, std::string>> dpkg_lists_;  // package, list/md5sums path
  std::map<std::string, DistInfo> dists_;
  std::vector<std::string> conda_, headers_, version_files_, frameworks_;
  std::map<std::string, PackageRef> owners_;  // canonical path -> owning package
  std::map<std::string, size_t> library_at_;  // present library path -> component index
};

}  // namespace

image::CapturePolicy CapturePolicy() {
  return
      [](std::string_view path, uint64_t size, uint32_t mode) -> std::unique_ptr<image::Capturer> {
        if (uint64_t limit = MetadataLimit(path)) return image::CapturePrefix(limit);
        if (LikelyElf(path, size, mode)) return elf::MakeCapturer();
        return nullptr;
      };
}

Catalog Build(const image::Image& image, const std::string& rules_dir) {
  LibraryRules rules = LoadLibraryRules(rules_dir);
  Catalog cat;
  Builder(image, rules, cat).Run();
  return cat;
}

}  // namespace imgcheck::catalog

// Which objects of the image are loaded, with what, and their link maps: built once per image.
#include "loader/session.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "catalog/metadata.h"
#include "util/path.h"

namespace imgcheck::loader {

util::Expected<Options> ImageOptions(const image::Image& image, const catalog::Catalog& catalog,
                                     std::vector<DlopenRule> dlopen) {
  util::Expected<Platform> platform = ImagePlatform(image.tree, catalog, image.config.architecture);
  if (!platform) return platform.error();
  Options o;
  o.platform = std::move(*platform);
  o.ld_library_path = catalog.config.Env("LD_LIBRARY_PATH");
  if (!image.config.working_dir.empty()) o.working_dir = image.config.working_dir;
  if (catalog.config.ld_so_cache) o.cache = &*catalog.config.ld_so_cache;
  o.dlopen = std::move(dlopen);
  // cuDNN 9 opens its sub-libraries by its own release first: the catalog's version of it.
  auto versions = std::make_shared<std::map<std::string, std::string, std::less<>>>();
  for (const catalog::Component& c : catalog.components)
    if (c.kind == catalog::ComponentKind::kCudaLibrary && !c.deleted && !c.version.empty())
      versions->emplace(c.path, c.version);
  o.version_of = [versions](std::string_view real_path) {
    auto it = versions->find(real_path);
    return it == versions->end() ? std::string() : it->second;
  };
  return o;
}

bool FindsLibc(const LoadGraph& graph) {
  for (const LoadedObject& o : graph.objects)
    for (const Resolution& r : o.resolutions)
      if (r.found() && r.name.starts_with("libc.so")) return true;
  return false;
}

namespace {

ElfLookup LookupIn(const catalog::Catalog& catalog) {
  return [&catalog](std::string_view p) { return catalog.Elf(p); };
}

// The link map of `root` with neither dlopen rules nor preloads: what a plain exec or dlopen of
// it maps.
LoadGraph PlainLoad(const image::Tree& tree, const catalog::Catalog& catalog, std::string_view root,
                    const Options& options) {
  Options plain = options;
  plain.dlopen.clear();
  plain.preload.clear();
  return Load(tree, LookupIn(catalog), root, plain);
}

bool InPythonDir(std::string_view path) {
  return path.find("/site-packages/") != std::string_view::npos ||
         path.find("/dist-packages/") != std::string_view::npos;
}

// The first non-CUDA DT_NEEDED of the root that does not resolve, when that says the root
// cannot run: the image has a libc the root finds (so missing means missing), or the name is a
// file elsewhere in the image its search path does not reach (a test binary in a wheel whose
// RPATH misses libtorch.so). "" otherwise.
std::string NotRunnable(const LoadGraph& graph, const catalog::LibraryRules& rules,
                        const std::set<std::string, std::less<>>& file_names) {
  if (graph.objects.empty()) return "";
  bool has_libc = FindsLibc(graph);
  for (const auto& r : graph.objects[0].resolutions) {
    if (r.found() || r.kind != Kind::kNeeded) continue;
    if (rules.Classify(catalog::LibraryBaseName(util::BaseName(r.name)))) continue;
    if (has_libc || file_names.count(util::BaseName(r.name))) return r.name;
  }
  return "";
}

// Directories of the tree matching `pattern` ("nvidia/*/lib") under `base`, sorted per
// component; links to directories followed.
std::vector<std::string> ExpandDirs(const image::Tree& tree, const std::string& base,
                                    const std::string& pattern) {
  std::vector<std::string> dirs = {base};
  for (const std::string& part : util::Split(pattern, '/')) {
    if (part.empty()) continue;
    std::vector<std::string> next;
    for (const std::string& dir : dirs) {
      if (part.find_first_of("*?[") == std::string::npos) {
        next.push_back(util::JoinPath(dir, part));
        continue;
      }
      for (const std::string& child : tree.List(dir))
        if (util::GlobMatch(part, child)) next.push_back(util::JoinPath(dir, child));
    }
    dirs.clear();
    for (const std::string& d : next)
      if (auto r = tree.Resolve(d); r && r->node && r->node->type == image::NodeType::kDirectory)
        dirs.push_back(r->path);
  }
  return dirs;
}

// The part of a file-name glob before its first '.' ("libcublas" of "libcublas.so.*[0-9]").
std::string_view Stem(std::string_view name) { return name.substr(0, name.find('.')); }

// Whether a row with `unless_loads` preloads: loading that file (site-relative) fails, and the
// failure names a library of the row's files (torch/__init__.py _load_global_deps re-raises any
// other error, and a missing file is such an error). The first unresolved DT_NEEDED in load
// order is the one dlerror names.
bool FallbackApplies(const image::Tree& tree, const catalog::Catalog& catalog,
                     const PreloadRow& row, const std::string& site, const Options& options) {
  auto r = tree.Resolve(util::JoinPath(site, row.unless_loads));
  if (!r || !r->node || !catalog.Elf(r->path)) return false;
  LoadGraph g = PlainLoad(tree, catalog, r->path, options);
  for (const Resolution* res : g.Resolutions()) {
    if (res->found() || res->kind != Kind::kNeeded) continue;
    std::string_view failed = Stem(res->name);
    return std::any_of(row.files.begin(), row.files.end(),
                       [&](const std::string& f) { return Stem(f) == failed; });
  }
  return false;
}

// What distribution `package` (installed in `site`) loads by `rows` (preload or imports): for
// each row's file pattern, the first match in the row's directories, in order. `fallbacks`
// memoises FallbackApplies per site-packages directory and row.
void PackageLoads(const image::Tree& tree, const catalog::Catalog& catalog,
                  const std::vector<PreloadRow>& rows, const std::string& package,
                  const std::string& site, const Options& options,
                  std::map<std::pair<std::string, const PreloadRow*>, bool>& fallbacks,
                  std::vector<Preload>& out) {
  for (const PreloadRow& row : rows) {
    if (!util::GlobMatch(row.package, package)) continue;
    if (!row.unless_loads.empty()) {
      auto [it, fresh] = fallbacks.try_emplace({site, &row}, false);
      if (fresh) it->second = FallbackApplies(tree, catalog, row, site, options);
      if (!it->second) continue;
    }
    std::vector<std::string> dirs;
    for (const std::string& pattern : row.dirs)
      for (std::string& d : ExpandDirs(tree, site, pattern)) dirs.push_back(std::move(d));
    for (const std::string& file : row.files) {
      bool loaded = false;
      for (const std::string& dir : dirs) {
        for (const std::string& name : tree.List(dir)) {
          if (!util::GlobMatch(file, name)) continue;
          auto r = tree.Resolve(util::JoinPath(dir, name));
          if (!r || !r->node || !catalog.Elf(r->path)) continue;
          std::string how = row.global ? "preloaded by " : "imported with RTLD_LOCAL by ";
          out.push_back(
              {r->path,
               how + package + " from " + dir +
                   (row.unless_loads.empty() ? "" : " (" + row.unless_loads + " did not load)"),
               row.global});
          loaded = true;
          break;
        }
        if (loaded) break;
      }
    }
  }
}

// The pip distributions of the image by normalised name (PEP 503), present ones only.
using Dists = std::map<std::string, const catalog::Component*, std::less<>>;
Dists PipDists(const catalog::Catalog& catalog) {
  Dists out;
  for (const catalog::Component* d : catalog.Find(catalog::ComponentKind::kPythonDist))
    if (!d->deleted) out.emplace(catalog::NormalizeDistName(d->name), d);
  return out;
}

// The distributions `dist` requires (Requires-Dist without an extra, recursively), each once,
// in the order Python imports them: a distribution after everything it requires. At most
// kMaxRequired (a hostile METADATA may name thousands).
constexpr size_t kMaxRequired = 256;
void Required(const Dists& dists, const catalog::Component& dist,
              std::set<const catalog::Component*>& seen,
              std::vector<const catalog::Component*>& out) {
  if (seen.size() >= kMaxRequired || !seen.insert(&dist).second) return;
  for (const catalog::Requirement& req : dist.requires_dist) {
    if (req.marker.find("extra") != std::string::npos) continue;
    auto it = dists.find(req.name);
    if (it != dists.end()) Required(dists, *it->second, seen, out);
  }
  out.push_back(&dist);
}

// The site-packages directory of a pip distribution (its *.dist-info directory's parent).
std::string SiteOf(const catalog::Component& dist) { return std::string(util::DirName(dist.path)); }

// Whether the imports table has a row for distribution `name` (a framework whose import it
// models: torch, tensorflow).
bool IsFramework(const ConsumerRules& rules, std::string_view name) {
  return rules.imports &&
         std::any_of(rules.imports->begin(), rules.imports->end(),
                     [&](const PreloadRow& row) { return util::GlobMatch(row.package, name); });
}

// The framework process an object or a distribution runs in, and the evidence.
struct Placement {
  const catalog::Component* framework = nullptr;  ///< the framework's pip distribution
  std::string why;
};

// Where the evidence places the image's objects: by distribution (PEP 503 name) and, for
// objects no pip distribution owns, by path (Session::Build's contract gives the order).
struct Placements {
  std::map<std::string, Placement, std::less<>> dists;
  std::map<std::string, Placement, std::less<>> objects;
  /// Shared objects that NEED a framework-only library (custom-op libraries, unowned ones).
  std::vector<std::string> needing;
};

// The names (DT_SONAME and file name) of the shared objects of framework distributions that
// no other object of the image answers to, with their framework: an object that NEEDS one can
// only ever load in that framework's process (libc10.so, libtensorflow_framework.so.2).
std::map<std::string, const catalog::Component*, std::less<>> FrameworkOnlyNames(
    const catalog::Catalog& catalog, const ConsumerRules& rules, const Dists& dists) {
  std::map<std::string, std::set<const catalog::Component*>, std::less<>> provided;
  std::set<std::string, std::less<>> elsewhere;
  for (const auto& [path, elf] : catalog.elves()) {
    if (elf.type != elf::kTypeSharedObject) continue;
    const catalog::PackageRef* owner = catalog.Owner(path);
    const catalog::Component* fw = nullptr;
    if (owner && owner->manager == catalog::PackageManager::kPip &&
        IsFramework(rules, catalog::NormalizeDistName(owner->name)))
      if (auto it = dists.find(catalog::NormalizeDistName(owner->name)); it != dists.end())
        fw = it->second;
    for (const std::string& name : {std::string(util::BaseName(path)), elf.soname}) {
      if (name.empty()) continue;
      if (fw) {
        provided[name].insert(fw);
      } else {
        elsewhere.insert(name);
      }
    }
  }
  std::map<std::string, const catalog::Component*, std::less<>> out;
  for (const auto& [name, fws] : provided)
    if (fws.size() == 1 && !elsewhere.count(name)) out.emplace(name, *fws.begin());
  return out;
}

Placements Place(const catalog::Catalog& catalog, const ConsumerRules& rules, const Dists& dists) {
  Placements out;
  if (!rules.imports) return out;
  // The files: a DT_NEEDED only a framework's objects provide, whatever the METADATA says.
  const auto only = FrameworkOnlyNames(catalog, rules, dists);
  if (!only.empty())
    for (const auto& [path, elf] : catalog.elves()) {
      if (elf.type != elf::kTypeSharedObject) continue;
      const catalog::PackageRef* owner = catalog.Owner(path);
      bool pip = owner && owner->manager == catalog::PackageManager::kPip;
      std::string dist = pip ? catalog::NormalizeDistName(owner->name) : "";
      if (pip && IsFramework(rules, dist)) continue;
      for (const std::string& name : elf.needed) {
        auto it = only.find(name);
        if (it == only.end()) continue;
        Placement p{it->second, it->second->name + "'s process: " +
                                    std::string(util::BaseName(path)) + " NEEDS " + name +
                                    ", which only " + it->second->name + "'s objects provide"};
        out.needing.push_back(path);
        if (pip) {
          out.dists.try_emplace(dist, std::move(p));
        } else {
          out.objects.try_emplace(path, std::move(p));
        }
        break;
      }
    }
  // The declarations: Requires-Dist (recursively), then the imports rows' imported_by.
  for (const auto& [name, dist] : dists) {
    if (out.dists.count(name) || IsFramework(rules, name)) continue;
    std::set<const catalog::Component*> seen;
    std::vector<const catalog::Component*> required;
    Required(dists, *dist, seen, required);
    for (const catalog::Component* d : required)
      if (d != dist && IsFramework(rules, catalog::NormalizeDistName(d->name))) {
        out.dists.emplace(name, Placement{d, d->name + "'s process: " + dist->name + " requires " +
                                                 d->name + " (Requires-Dist)"});
        break;
      }
    if (out.dists.count(name)) continue;
    for (const PreloadRow& row : *rules.imports)
      for (const std::string& by : row.imported_by)
        if (auto fw = dists.find(row.package); fw != dists.end() && util::GlobMatch(by, name))
          out.dists.try_emplace(
              name, Placement{fw->second, fw->second->name + "'s process: " + dist->name +
                                              " imports " + fw->second->name + " first"});
  }
  return out;
}

// What the process of a module of distribution `owner` holds before the module loads: for each
// distribution it requires, dependencies first, what that one preloads and its import loads;
// then what `owner` itself preloads.
// `owner` is null for an object no pip distribution owns; `placed` is the framework the
// evidence placed it (or its distribution) in, null when none.
std::vector<Preload> ProcessLoads(
    const image::Tree& tree, const catalog::Catalog& catalog, const ConsumerRules& rules,
    const Dists& dists, const catalog::PackageRef* owner, const catalog::Component* placed,
    const Options& options, std::map<std::pair<std::string, const PreloadRow*>, bool>& fallbacks) {
  std::vector<Preload> out;
  auto self = owner ? dists.find(catalog::NormalizeDistName(owner->name)) : dists.end();
  std::set<const catalog::Component*> seen;
  std::vector<const catalog::Component*> required;
  // The framework it was placed in first (its import runs before the package's own).
  if (placed) Required(dists, *placed, seen, required);
  if (self != dists.end() && rules.imports) Required(dists, *self->second, seen, required);
  for (const catalog::Component* d : required) {
    if (self != dists.end() && d == self->second) continue;
    PackageLoads(tree, catalog, *rules.preload, d->name, SiteOf(*d), options, fallbacks, out);
    if (rules.imports)
      PackageLoads(tree, catalog, *rules.imports, d->name, SiteOf(*d), options, fallbacks, out);
  }
  // RECORD lies in <site-packages>/<dist>.dist-info/.
  if (owner)
    PackageLoads(tree, catalog, *rules.preload, owner->name,
                 std::string(util::DirName(util::DirName(owner->metadata))), options, fallbacks,
                 out);
  return out;
}

// A file of a pip distribution: its owner, and its path relative to the owner's
// site-packages directory (where the *.dist-info directory lies).
struct InSite {
  const catalog::PackageRef* owner = nullptr;
  std::string site, rel;
};
std::optional<InSite> SiteRelative(const catalog::Catalog& catalog, std::string_view path) {
  const catalog::PackageRef* owner = catalog.Owner(path);
  if (!owner || owner->manager != catalog::PackageManager::kPip) return std::nullopt;
  std::string site(util::DirName(util::DirName(owner->metadata)));
  if (path.size() <= site.size() + 1 || path.compare(0, site.size() + 1, site + "/") != 0)
    return std::nullopt;
  return InSite{owner, site, std::string(path.substr(site.size() + 1))};
}

// The version of the installed distribution `name`; "" when none is installed.
std::string VersionOf(const Dists& dists, std::string_view name) {
  auto it = dists.find(catalog::NormalizeDistName(name));
  return it == dists.end() ? "" : it->second->version;
}

// The major release of the installed distribution `name` ("13" of cuda-bindings 13.4.4); ""
// when none is installed or its version does not start with a number.
std::string MajorOf(const Dists& dists, std::string_view name) {
  std::string version = VersionOf(dists, name);
  std::string major = version.substr(0, version.find('.'));
  return major.find_first_not_of("0123456789") == std::string::npos ? major : "";
}

// Whether an on_call row names the module `in`.
bool Names(const OnCallRow& row, const InSite& in) {
  return util::GlobMatch(row.package, in.owner->name) && util::GlobMatch(row.module, in.rel);
}

// `text` with "{major}" replaced by `major`.
std::string WithMajor(std::string text, const std::string& major) {
  if (size_t at = text.find("{major}"); at != std::string::npos) text.replace(at, 7, major);
  return text;
}

// The optional row whose files name `root`, null when none.
const OptionalRow* OptionalRowOf(const catalog::Catalog& catalog,
                                 const std::vector<OptionalRow>& rows, std::string_view root) {
  std::optional<InSite> in = SiteRelative(catalog, root);
  if (!in) return nullptr;
  for (const OptionalRow& row : rows)
    if (util::GlobMatch(row.package, in->owner->name) &&
        std::any_of(row.files.begin(), row.files.end(),
                    [&](const std::string& file) { return util::GlobMatch(file, in->rel); }))
      return &row;
  return nullptr;
}

// The glob of the file `row`'s select picks for the installed release of its major_of ("{major}"
// and "{minor}" of it: torch 2.14.0 gives 2 and 14); "" when none is installed.
std::string SelectGlob(const Dists& dists, const OptionalRow& row) {
  std::string major = MajorOf(dists, row.major_of);
  if (major.empty()) return "";
  std::string select = WithMajor(row.select, major);
  if (size_t at = select.find("{minor}"); at != std::string::npos) {
    std::vector<std::string> parts = util::Split(VersionOf(dists, row.major_of), '.');
    std::string minor = parts.size() > 1 ? parts[1] : "";
    minor.resize(std::min(minor.size(), minor.find_first_not_of("0123456789")));
    select.replace(at, 7, minor);
  }
  return select;
}

// Why the package owning `root` loads it only on request (`row`, its optional row); "" if not, or
// when it is the file a row's `select` picks for the installed release.
std::string Optional(const catalog::Catalog& catalog, const Dists& dists, const OptionalRow* row,
                     std::string_view root) {
  std::optional<InSite> in = SiteRelative(catalog, root);
  if (!row || !in) return "";
  std::string why = in->owner->name + " loads it when " + row->when;
  if (row->select.empty()) return why;
  std::string select = SelectGlob(dists, *row);
  if (select.empty()) return why + " (no " + row->major_of + " is installed to select one)";
  if (util::GlobMatch(select, in->rel)) return "";
  return why + " (the installed " + row->major_of + " " + VersionOf(dists, row->major_of) +
         " selects " + select + ")";
}

// What the package loads by full path before the module at `root` (`row`'s loads_first), as
// preloads with RTLD_LOCAL (torch.ops.load_library is ctypes.CDLL).
std::vector<Preload> LoadsFirst(const image::Tree& tree, const catalog::Catalog& catalog,
                                const OptionalRow& row, std::string_view root) {
  std::vector<Preload> out;
  std::optional<InSite> in = SiteRelative(catalog, root);
  if (!in) return out;
  for (const OptionalRow::LoadsFirst& first : row.loads_first) {
    if (!util::GlobMatch(first.module, in->rel)) continue;
    std::string library = first.library;
    size_t star = first.module.find('*');
    if (size_t at = library.find('*');
        at != std::string::npos && star != std::string::npos &&
        first.module.find_first_of("*?[", star + 1) == std::string::npos) {
      size_t tail = first.module.size() - star - 1;  // the glob after its '*'
      library.replace(at, 1, in->rel.substr(star, in->rel.size() - star - tail));
    }
    auto r = tree.Resolve(util::JoinPath(in->site, library));
    if (!r || !r->node || !catalog.Elf(r->path) || r->path == root) continue;
    out.push_back({r->path, "loaded by path by " + in->owner->name + " before the module", false});
  }
  return out;
}

// `name` resolved as ld.so searches for the main program, without an RPATH of its own
// (LD_LIBRARY_PATH, ld.so.cache, the system directories); a name with a '/' is a path.
Resolution MainSearch(const image::Tree& tree, const catalog::Catalog& catalog,
                      const Options& options, std::string_view name, Kind kind) {
  static const elf::ElfInfo kNoDynamic;
  LoadGraph main;
  main.objects.push_back({});
  main.objects[0].elf = &kNoDynamic;
  main.objects[0].real_path = options.working_dir + "/-";
  return Resolve(tree, LookupIn(catalog), main, 0, name, kind, options);
}

// The CUDA toolkit root of a library at `path` as cuda-pathfinder derives it: ROOT/lib64/x,
// ROOT/lib/x, ROOT/targets/TRIPLE/lib64/x, ROOT/targets/TRIPLE/lib/x; "" otherwise.
std::string ToolkitRoot(std::string_view path) {
  std::string_view dir = util::DirName(path), base = util::BaseName(dir);
  if (base != "lib64" && base != "lib") return "";
  std::string_view parent = util::DirName(dir), grand = util::DirName(parent);
  return std::string(util::BaseName(grand) == "targets" ? util::DirName(grand) : parent);
}

// What the on_call rows of a module say of it: why its package loads them ("" when no row
// names it), and for a row it cannot do without, what fails and the fix.
struct OnCall {
  std::string why, fails, fix;
};

// The on_call rows of the module at `root`, applied to its loader options: each library found
// in a row's directories joins the process as pathfinder loads it (full path, RTLD_GLOBAL);
// otherwise the module dlopens its names (pathfinder's fallback, dlopen of the bare name).
OnCall OnCallLoads(const image::Tree& tree, const catalog::Catalog& catalog, const Dists& dists,
                   const std::vector<OnCallRow>& rows, std::string_view root, Options& options) {
  std::optional<InSite> in = SiteRelative(catalog, root);
  if (!in) return {};
  OnCall out;
  for (const OnCallRow& row : rows) {
    if (!Names(row, *in)) continue;
    if (row.with.size() == 2) {
      std::string with = MajorOf(dists, row.with[0]);
      if (with.empty() || !util::GlobMatch(row.with[1], with)) continue;
    }
    std::string major = MajorOf(dists, in->owner->name);
    std::vector<std::string> names;
    for (const std::string& n : row.names) names.push_back(WithMajor(n, major));
    auto load_from_dirs = [&] {
      for (const std::string& pattern : row.dirs)
        for (const std::string& dir : ExpandDirs(tree, in->site, WithMajor(pattern, major)))
          for (const std::string& name : names) {
            auto r = tree.Resolve(util::JoinPath(dir, name));
            if (!r || !r->node || !catalog.Elf(r->path)) continue;
            options.preload.push_back(
                {r->path, "loaded by cuda-pathfinder for " + in->owner->name + " from " + dir,
                 true});
            return true;
          }
      return false;
    };
    // pathfinder's last steps for a name the system search misses: the toolkit under
    // $CUDA_PATH or $CUDA_HOME, then the root of the toolkit whose canary (libcudart) the
    // system search finds (/usr/local/cuda/lib64/libcudart.so.12: /usr/local/cuda).
    auto load_from_toolkit = [&] {
      if (row.ctk_dirs.empty() || std::any_of(names.begin(), names.end(), [&](const auto& n) {
            return MainSearch(tree, catalog, options, n, Kind::kDlopen).found();
          }))
        return false;
      std::vector<std::string> roots;
      for (const char* var : {"CUDA_PATH", "CUDA_HOME"})
        if (std::optional<std::string> v = catalog.config.Env(var); v && v->starts_with('/')) {
          roots.push_back(*v);
          break;
        }
      for (const std::string& canary : row.canary)
        if (Resolution r = MainSearch(tree, catalog, options, canary, Kind::kDlopen); r.found()) {
          if (std::string root = ToolkitRoot(r.path); !root.empty()) roots.push_back(root);
          break;
        }
      for (const std::string& root : roots)
        for (const std::string& dir : row.ctk_dirs)
          for (const std::string& name : names) {
            auto r = tree.Resolve(util::JoinPath(util::JoinPath(root, dir), name));
            if (!r || !r->node || !catalog.Elf(r->path)) continue;
            options.preload.push_back({r->path,
                                       "loaded by cuda-pathfinder for " + in->owner->name +
                                           " from the CUDA toolkit at " + root,
                                       true});
            return true;
          }
      return false;
    };
    if (!load_from_dirs() && !load_from_toolkit())
      options.dlopen.push_back(
          {std::string(util::BaseName(root)), {DlopenCall(std::move(names))}, row.source});
    if (out.why.empty()) out.why = in->owner->name + " loads it when " + row.when;
    if (out.fails.empty() && !row.fails.empty()) {
      out.fails = row.fails;
      out.fix = row.fix;
    }
  }
  return out;
}

// The Python extension modules no consumer root covers whose DT_NEEDED names a library that
// only another package's directory holds (no ld.so.cache or system directory answers for it)
// and that does not resolve in a load of their own: nothing places them, and they cannot load
// alone. At most Session::kMaxUnplaced are loaded.
std::vector<Unplaced> FindUnplaced(const image::Tree& tree, const catalog::Catalog& catalog,
                                   const std::vector<Consumer>& consumers, const Options& options) {
  std::set<std::string, std::less<>> roots, private_names;
  for (const Consumer& c : consumers) roots.insert(c.path);
  for (const auto& [path, elf] : catalog.elves())
    if (elf.type == elf::kTypeSharedObject && InPythonDir(path))
      private_names.emplace(util::BaseName(path));
  std::vector<Unplaced> out;
  size_t looked = 0;
  for (const auto& [path, elf] : catalog.elves()) {
    if (roots.count(path) || elf.type != elf::kTypeSharedObject || !ImportsAsModule(path, elf))
      continue;
    if (std::none_of(elf.needed.begin(), elf.needed.end(),
                     [&](const std::string& n) { return private_names.count(n) > 0; }))
      continue;
    if (++looked > Session::kMaxUnplaced) break;
    LoadGraph g = PlainLoad(tree, catalog, path, options);
    if (g.objects.empty() || !FindsLibc(g)) continue;
    for (const Resolution& r : g.objects[0].resolutions)
      if (!r.found() && r.kind == Kind::kNeeded && private_names.count(r.name)) {
        out.push_back({path, catalog::PackageLabel(catalog, path), r.name});
        break;
      }
  }
  return out;
}

// The entries of LD_PRELOAD (separated by spaces and colons) and /etc/ld.so.preload (spaces,
// tabs, newlines and colons), each resolved as ld.so does for the main program: a name with a
// '/' is a path, any other is searched (LD_LIBRARY_PATH, ld.so.cache, the system directories);
// dynamic string tokens expanded (glibc elf/rtld.c handle_preload_list, do_preload).
std::vector<PreloadEntry> Preloads(const image::Tree& tree, const catalog::Catalog& catalog,
                                   const Options& options) {
  std::vector<PreloadEntry> out;
  auto add = [&](std::string_view list, std::string_view separators, const std::string& from,
                 int layer) {
    for (size_t at = 0; at < list.size() && out.size() < 64;) {
      size_t end = list.find_first_of(separators, at);
      if (end == std::string_view::npos) end = list.size();
      std::string_view entry = list.substr(at, end - at);
      at = end + 1;
      if (entry.empty()) continue;
      PreloadEntry e{std::string(entry), from, layer, {}};
      e.resolution = MainSearch(tree, catalog, options, entry, Kind::kNeeded);
      out.push_back(std::move(e));
    }
  };
  if (std::optional<std::string> env = catalog.config.Env("LD_PRELOAD"))
    add(*env, " :", "LD_PRELOAD", -1);
  const std::string file = "/etc/ld.so.preload";
  if (auto r = tree.Resolve(file);
      r && r->node && r->node->type == image::NodeType::kRegular && r->node->content)
    if (std::optional<std::string_view> text = r->node->content->ViewFrom(0))
      add(*text, " \t\n:", file, r->node->layer);
  return out;
}

struct LoadRoot {
  std::string path, role;
  const catalog::Component* framework;
};

// The consumers worth loading, in order (Session::Build's contract), at most `limit`.
std::vector<LoadRoot> ChooseRoots(const catalog::Catalog& catalog,
                                  const ConsumerRules& consumer_rules, const Placements& placements,
                                  size_t limit) {
  const catalog::LibraryRules& rules = *consumer_rules.libraries;
  std::vector<LoadRoot> roots;
  std::set<std::string> seen;
  auto add = [&](const std::string& path, std::string role, const catalog::Component* fw) {
    if (roots.size() < limit && seen.insert(path).second)
      roots.push_back({path, std::move(role), fw});
  };
  for (const catalog::Component* fw : catalog.Find(catalog::ComponentKind::kFramework)) {
    if (fw->deleted) continue;
    std::string dir = catalog::FrameworkPackageDir(*fw);
    for (auto it = catalog.elves().lower_bound(dir + "/");
         it != catalog.elves().end() && it->first.starts_with(dir + "/"); ++it)
      if (it->first.find(".so") != std::string::npos && it->second.type == elf::kTypeSharedObject)
        add(it->first, "framework " + fw->name, fw);
  }
  for (const auto& c : catalog.components)
    if (c.kind == catalog::ComponentKind::kCudaLibrary && !c.deleted && catalog.Elf(c.path))
      add(c.path, "cuda-library " + c.family, nullptr);
  // A pip package that vendors a CUDA library (auditwheel: <dist>.libs/, <pkg>/.libs/) is its
  // consumer: its other shared objects (extension modules) reach it through their RPATH.
  std::set<std::string, std::less<>> vendoring;
  for (const auto& c : catalog.components)
    if (c.kind == catalog::ComponentKind::kCudaLibrary && !c.deleted && c.owner &&
        c.owner->manager == catalog::PackageManager::kPip &&
        catalog::IsVendoredName(util::BaseName(c.path)))
      vendoring.insert(c.owner->name);
  for (const auto& [path, elf] : catalog.elves()) {
    const catalog::PackageRef* owner = vendoring.empty() ? nullptr : catalog.Owner(path);
    if (owner && elf.type == elf::kTypeSharedObject && vendoring.count(owner->name) &&
        !catalog::IsVendoredName(util::BaseName(path)))
      add(path, "library", nullptr);
  }
  // Any other program or shared object that links a classified library: extension modules
  // (flash-attn, bitsandbytes, CuPy), application libraries, tools.
  std::map<std::string, bool, std::less<>> classified;  // needed name -> has a family
  auto links_cuda = [&](const std::string& name) {
    auto it = classified.find(name);
    if (it == classified.end())
      it = classified
               .emplace(name,
                        rules.Classify(catalog::LibraryBaseName(util::BaseName(name))) != nullptr)
               .first;
    return it->second;
  };
  for (const auto& [path, elf] : catalog.elves()) {
    bool program = !elf.interpreter.empty();
    if (!program && elf.type != elf::kTypeSharedObject) continue;
    // Libraries of a family (CUDA libraries above; driver files, stubs) are not consumers here.
    if (rules.Classify(catalog::LibraryBaseName(util::BaseName(path)))) continue;
    if (std::any_of(elf.needed.begin(), elf.needed.end(), links_cuda))
      add(path, program ? "executable" : "library", nullptr);
  }
  // The extension modules of distributions placed in a framework's process (torchvision's
  // _C.so in torch's), and the other objects whose own DT_NEEDED places them there (custom-op
  // libraries): the libraries they bring, vendored ones too, are in their link maps.
  if (!placements.dists.empty())
    for (const auto& [path, elf] : catalog.elves()) {
      if (elf.type != elf::kTypeSharedObject || !ImportsAsModule(path, elf)) continue;
      const catalog::PackageRef* owner = catalog.Owner(path);
      if (owner && owner->manager == catalog::PackageManager::kPip &&
          placements.dists.count(catalog::NormalizeDistName(owner->name)))
        add(path, "extension " + owner->name, nullptr);
    }
  for (const std::string& path : placements.needing) {
    const catalog::PackageRef* owner = catalog.Owner(path);
    add(path, owner ? "extension " + owner->name : "library", nullptr);
  }
  // The modules that load libraries on their first call (cuda-bindings' nvrtc through
  // cuda-pathfinder): no ELF names those libraries, so only a consumer of their own shows them.
  if (consumer_rules.on_call && !consumer_rules.on_call->empty())
    for (const auto& [path, elf] : catalog.elves()) {
      if (elf.type != elf::kTypeSharedObject) continue;
      std::optional<InSite> in = SiteRelative(catalog, path);
      if (in && std::any_of(consumer_rules.on_call->begin(), consumer_rules.on_call->end(),
                            [&](const OnCallRow& row) { return Names(row, *in); }))
        add(path, "extension " + in->owner->name, nullptr);
    }
  return roots;
}

// "python3.11" for a module under .../python3.11/site-packages or tagged cpython-311; "" when
// neither says.
std::string PythonOf(std::string_view path) {
  for (const std::string& part : util::Split(path, '/'))
    if (part.starts_with("python3.") && part.size() > 8) return part;
  std::string_view name = util::BaseName(path);
  if (size_t at = name.find(".cpython-3"); at != std::string_view::npos) {
    size_t digits = at + 10, end = digits;
    while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
    if (end > digits) return "python3." + std::string(name.substr(digits, end - digits));
  }
  return "";
}

// The Python interpreters of the image: ELF programs named python3.N, by that name.
std::map<std::string, std::string> Interpreters(const catalog::Catalog& catalog) {
  std::map<std::string, std::string> out;
  for (const auto& [path, elf] : catalog.elves()) {
    std::string_view name = util::BaseName(path);
    if (elf.interpreter.empty() || !name.starts_with("python3.") || name.size() <= 8) continue;
    if (name.substr(8).find_first_not_of("0123456789") != std::string_view::npos) continue;
    out.emplace(std::string(name), path);
  }
  return out;
}

// The interpreter (real path) a Python extension module at `path` runs in; "" when the image
// has none.
std::string InterpreterFor(const std::map<std::string, std::string>& interpreters,
                           std::string_view path) {
  std::string python = PythonOf(path);
  auto exe = python.empty() ? interpreters.begin() : interpreters.find(python);
  return exe == interpreters.end() ? "" : exe->second;
}

}  // namespace

Session Session::Build(const image::Image& image, const catalog::Catalog& catalog,
                       const ConsumerRules& rules, Options options, size_t limit) {
  Session s;
  s.tree_ = &image.tree;
  s.catalog_ = &catalog;
  s.options_ = std::move(options);
  // Every link map of the image, and every later lookup, resolves its candidate paths once.
  s.options_.resolved = std::make_shared<ResolvedPaths>(image.tree);
  const Options& base = s.options_;
  const Dists dists = PipDists(catalog);
  const Placements placements = Place(catalog, rules, dists);
  std::vector<LoadRoot> roots = ChooseRoots(catalog, rules, placements, limit);
  // What LD_PRELOAD and /etc/ld.so.preload map into every process is checked as a consumer.
  s.preloads_ = Preloads(image.tree, catalog, base);
  for (const PreloadEntry& e : s.preloads_)
    if (e.resolution.found() && roots.size() < limit &&
        std::none_of(roots.begin(), roots.end(),
                     [&](const LoadRoot& r) { return r.path == e.resolution.real_path; }))
      roots.push_back({e.resolution.real_path, "preload (" + e.from + ")", nullptr});
  Options plain = base;
  plain.dlopen = rules.dlopen(nullptr);
  // One budget for every consumer's link map: together they are bounded, not each alone.
  if (!plain.budget) plain.budget = std::make_shared<Budget>(Budget{base.limits.loader_work});
  std::map<std::pair<std::string, const PreloadRow*>, bool> fallbacks;
  // The process of each pip distribution's modules, once per distribution (and per framework
  // for the objects no distribution owns).
  std::map<std::string, std::vector<Preload>, std::less<>> processes;
  for (LoadRoot& root : roots) {
    Options own = plain;
    if (root.framework) own.dlopen = rules.dlopen(root.framework);
    const catalog::PackageRef* owner = catalog.Owner(root.path);
    if (owner && owner->manager != catalog::PackageManager::kPip) owner = nullptr;
    const Placement* placed = nullptr;
    if (auto it = owner ? placements.dists.find(catalog::NormalizeDistName(owner->name))
                        : placements.objects.find(root.path);
        it != (owner ? placements.dists.end() : placements.objects.end()))
      placed = &it->second;
    if (owner || placed) {
      auto [it, fresh] =
          processes.try_emplace(owner ? owner->metadata : "\n" + placed->framework->path);
      if (fresh)
        it->second = ProcessLoads(image.tree, catalog, rules, dists, owner,
                                  placed ? placed->framework : nullptr, base, fallbacks);
      own.preload = it->second;
    }
    const OptionalRow* optional_row = OptionalRowOf(catalog, *rules.optional, root.path);
    if (optional_row)
      for (Preload& p : LoadsFirst(image.tree, catalog, *optional_row, root.path))
        own.preload.push_back(std::move(p));
    OnCall on_call;
    if (rules.on_call)
      on_call = OnCallLoads(image.tree, catalog, dists, *rules.on_call, root.path, own);
    Consumer c;
    c.path = std::move(root.path);
    c.role = std::move(root.role);
    c.graph = Load(image.tree, LookupIn(catalog), c.path, own);
    if (c.graph.objects.empty()) continue;
    c.package = catalog::PackageLabel(catalog, c.path);
    c.optional = Optional(catalog, dists, optional_row, c.path);
    if (optional_row && !c.optional.empty()) c.optional_system = optional_row->system;
    // Optional() says why unless it is the selected file: with an installed release to select
    // by, that reason means another release's file.
    c.unselected = optional_row && !optional_row->select.empty() && !c.optional.empty() &&
                   !SelectGlob(dists, *optional_row).empty();
    c.on_call = !on_call.why.empty();
    c.on_call_fails = std::move(on_call.fails);
    c.on_call_fix = std::move(on_call.fix);
    if (c.optional.empty() && c.on_call_fails.empty()) c.optional = std::move(on_call.why);
    if (placed) {
      c.process = placed->why;
      c.framework = placed->framework->name;
    }
    s.consumers_.push_back(std::move(c));
  }
  s.unplaced_ = FindUnplaced(image.tree, catalog, s.consumers_, base);
  std::set<std::string, std::less<>> file_names;
  for (const auto& [path, elf] : catalog.elves()) file_names.emplace(util::BaseName(path));
  for (Consumer& c : s.consumers_) {
    const elf::ElfInfo* elf = catalog.Elf(c.path);
    c.imported = elf && ImportsAsModule(c.path, *elf) && FindsLibc(c.graph);
    // An import that fails is a failure of its own (every DT_NEEDED it misses), not a module
    // that cannot run anyway.
    if (!c.imported) c.not_runnable = NotRunnable(c.graph, *rules.libraries, file_names);
  }
  // The processes the runnable Python extension modules run in.
  s.interpreters_ = Interpreters(catalog);
  for (const Consumer& c : s.consumers_) {
    if (!c.not_runnable.empty() || !InPythonDir(c.path)) continue;
    std::string exe = InterpreterFor(s.interpreters_, c.path);
    if (!exe.empty() && !s.interpreter_maps_.count(exe))
      s.interpreter_maps_.emplace(exe, PlainLoad(image.tree, catalog, exe, base));
  }
  return s;
}

Session Session::ForRoots(const image::Image& image, const catalog::Catalog& catalog,
                          const std::vector<std::string>& roots, Options options) {
  Session s;
  s.tree_ = &image.tree;
  s.catalog_ = &catalog;
  s.options_ = std::move(options);
  s.options_.resolved = std::make_shared<ResolvedPaths>(image.tree);
  for (const std::string& root : roots) {
    Consumer c;
    c.path = root;
    c.role = "--consumer";
    c.graph = Load(image.tree, LookupIn(catalog), root, s.options_);
    s.consumers_.push_back(std::move(c));
  }
  return s;
}

bool ImportsAsModule(std::string_view path, const elf::ElfInfo& elf) {
  std::string_view name = util::BaseName(path);
  if (!InPythonDir(path) || !name.ends_with(".so") || name.size() <= 3) return false;
  if (!name.starts_with("lib")) return true;
  // paddle/base/libpaddle.so is the module paddle.base.libpaddle: CPython calls the
  // PyInit_<name> a module's file defines, whatever the name.
  const uint64_t init = elf::NameHash("PyInit_" + std::string(name.substr(0, name.find('.'))));
  if (elf.has_export_keys)
    return std::binary_search(elf.export_keys.begin(), elf.export_keys.end(), init);
  return std::any_of(elf.exported.begin(), elf.exported.end(),
                     [&](const elf::Symbol& s) { return elf::SymbolNameHash(s) == init; });
}

Session::Process Session::InterpreterOf(const Consumer& consumer) const {
  Process p;
  if (!InPythonDir(consumer.path)) return p;
  p.python = true;
  auto it = interpreter_maps_.find(InterpreterFor(interpreters_, consumer.path));
  if (it != interpreter_maps_.end()) p.interpreter = &it->second;
  return p;
}

Resolution Session::Resolve(const Consumer& consumer, int object, std::string_view name,
                            Kind kind) const {
  return loader::Resolve(*tree_, LookupIn(*catalog_), consumer.graph, object, name, kind, options_);
}

}  // namespace imgcheck::loader

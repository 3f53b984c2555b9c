// Which objects of the image are loaded, and the loader's options for the image.
#include <algorithm>
#include <map>
#include <set>

#include "catalog/metadata.h"
#include "rules/context.h"
#include "rules/scan.h"
#include "util/path.h"

namespace imgcheck::rules {

namespace {

// The dlopen rules as they apply to objects of one framework build: a name with "{cudnn_major}"
// (TensorFlow's dso_loader opens libcudnn.so.<the major it was built with>) gets the major from
// the framework's build facts; without such facts (or outside a framework) the name is dropped.
// A rule for one CUDA major (TensorFlow's libcufft.so.11: CUDA 12 builds) applies only to a build
// whose facts name that major.
std::vector<loader::DlopenRule> ForBuild(const std::vector<loader::DlopenRule>& rules,
                                         const catalog::BuildFacts* facts) {
  constexpr std::string_view kCudnnMajor = "{cudnn_major}";
  std::optional<Version> cudnn, cuda;
  if (facts != nullptr) {
    for (const char* key : {"cudnn_version", "cudnn"})
      if (auto it = facts->find(key); it != facts->end() && !cudnn)
        cudnn = Version::Parse(it->second);
    for (const char* key : {"cuda_version", "cuda"})
      if (auto it = facts->find(key); it != facts->end() && !cuda)
        cuda = Version::Parse(it->second);
  }
  std::vector<loader::DlopenRule> out;
  for (loader::DlopenRule rule : rules) {
    if (rule.cuda_major != 0 && (!cuda || cuda->major() != rule.cuda_major)) continue;
    std::vector<loader::DlopenCall> calls;
    for (loader::DlopenCall& call : rule.calls) {
      std::vector<std::string> names;
      for (std::string& name : call.names) {
        size_t at = name.find(kCudnnMajor);
        if (at == std::string::npos) {
          names.push_back(std::move(name));
        } else if (cudnn) {
          names.push_back(name.replace(at, kCudnnMajor.size(), std::to_string(cudnn->major())));
        }
      }
      if (!names.empty()) calls.emplace_back(std::move(names));
    }
    rule.calls = std::move(calls);
    out.push_back(std::move(rule));
  }
  return out;
}

}  // namespace

util::Expected<loader::Options> LoaderOptions(const image::Image& image,
                                              const catalog::Catalog& catalog,
                                              std::vector<loader::DlopenRule> dlopen) {
  util::Expected<loader::Platform> platform =
      loader::ImagePlatform(image.tree, catalog, image.config.architecture);
  if (!platform) return platform.error();
  loader::Options o;
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

std::string FrameworkPackageDir(const catalog::Component& fw) {
  if (size_t at = fw.path.find("-packages/"); at != std::string::npos) {
    size_t end = fw.path.find('/', at + 10);
    if (end != std::string::npos) return fw.path.substr(0, end);
  }
  return std::string(util::DirName(fw.path));
}

std::string PackageLabel(const catalog::Catalog& catalog, std::string_view path) {
  const catalog::PackageRef* owner = catalog.Owner(path);
  if (!owner) return "unowned in " + std::string(util::DirName(path));
  std::string label = owner->name + (owner->version.empty() ? "" : " " + owner->version);
  if (owner->manager == catalog::PackageManager::kPip) return label;
  return std::string(catalog::ManagerName(owner->manager)) + " " + label;
}

namespace {

// The first non-CUDA DT_NEEDED of the root that does not resolve, when that says the root
// cannot run: the image has a libc the root finds (so missing means missing), or the name is a
// file elsewhere in the image its search path does not reach (a test binary in a wheel whose
// RPATH misses libtorch.so). "" otherwise.
std::string NotRunnable(const loader::LoadGraph& graph, const catalog::LibraryRules& rules,
                        const std::set<std::string, std::less<>>& file_names) {
  if (graph.objects.empty()) return "";
  const auto& own = graph.objects[0].resolutions;
  bool has_libc = std::any_of(own.begin(), own.end(), [](const loader::Resolution& r) {
    return r.found() && r.name.rfind("libc.so", 0) == 0;
  });
  for (const auto& r : own) {
    if (r.found() || r.kind != loader::Kind::kNeeded) continue;
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
                     const PreloadRow& row, const std::string& site,
                     const loader::Options& options) {
  auto r = tree.Resolve(util::JoinPath(site, row.unless_loads));
  if (!r || !r->node || !catalog.Elf(r->path)) return false;
  loader::Options plain = options;
  plain.dlopen.clear();
  plain.preload.clear();
  auto lookup = [&catalog](std::string_view p) { return catalog.Elf(p); };
  loader::LoadGraph g = loader::Load(tree, lookup, r->path, plain);
  for (const loader::Resolution* res : g.Resolutions()) {
    if (res->found() || res->kind != loader::Kind::kNeeded) continue;
    std::string_view failed = Stem(res->name);
    return std::any_of(row.files.begin(), row.files.end(),
                       [&](const std::string& f) { return Stem(f) == failed; });
  }
  return false;
}

// What the package owning `root` loads before its extensions (dlopen.json's preload rows): for
// each file pattern, the first match in the row's directories, in order. `fallbacks` memoises
// FallbackApplies per site-packages directory and row.
std::vector<loader::Preload> Preloads(const image::Tree& tree, const catalog::Catalog& catalog,
                                      const Knowledge& knowledge, std::string_view root,
                                      const loader::Options& options,
                                      std::map<std::pair<std::string, size_t>, bool>& fallbacks) {
  std::vector<loader::Preload> out;
  const catalog::PackageRef* owner = catalog.Owner(root);
  if (!owner || owner->manager != catalog::PackageManager::kPip) return out;
  // RECORD lies in <site-packages>/<dist>.dist-info/.
  std::string site(util::DirName(util::DirName(owner->metadata)));
  for (size_t i = 0; i < knowledge.preload().size(); ++i) {
    const PreloadRow& row = knowledge.preload()[i];
    if (!util::GlobMatch(row.package, owner->name)) continue;
    if (!row.unless_loads.empty()) {
      auto [it, fresh] = fallbacks.try_emplace({site, i}, false);
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
          out.push_back(
              {r->path,
               "preloaded by " + owner->name + " from " + dir +
                   (row.unless_loads.empty() ? "" : " (" + row.unless_loads + " did not load)")});
          loaded = true;
          break;
        }
        if (loaded) break;
      }
    }
  }
  return out;
}

// Why the package owning `root` loads it only on request (dlopen.json optional); "" if not.
std::string Optional(const catalog::Catalog& catalog, const Knowledge& knowledge,
                     std::string_view root) {
  const catalog::PackageRef* owner = catalog.Owner(root);
  if (!owner || owner->manager != catalog::PackageManager::kPip) return "";
  std::string site(util::DirName(util::DirName(owner->metadata)));
  if (root.size() <= site.size() + 1 || root.compare(0, site.size() + 1, site + "/") != 0)
    return "";
  std::string_view rel = root.substr(site.size() + 1);
  for (const OptionalRow& row : knowledge.optional())
    if (util::GlobMatch(row.package, owner->name))
      for (const std::string& file : row.files)
        if (util::GlobMatch(file, rel)) return owner->name + " loads it when " + row.when;
  return "";
}

}  // namespace

std::vector<Consumer> LoadConsumers(const image::Image& image, const catalog::Catalog& catalog,
                                    const Knowledge& knowledge, const loader::Options& options,
                                    size_t limit) {
  const catalog::LibraryRules& rules = knowledge.libraries();
  struct Root {
    std::string path, role;
    const catalog::Component* framework;
  };
  std::vector<Root> roots;
  std::set<std::string> seen;
  auto add = [&](const std::string& path, std::string role, const catalog::Component* fw) {
    if (roots.size() < limit && seen.insert(path).second)
      roots.push_back({path, std::move(role), fw});
  };
  for (const catalog::Component* fw : catalog.Find(catalog::ComponentKind::kFramework)) {
    if (fw->deleted) continue;
    std::string dir = FrameworkPackageDir(*fw);
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
  std::set<std::string, std::less<>> file_names;
  for (const auto& [path, elf] : catalog.elves()) {
    file_names.emplace(util::BaseName(path));
    bool program = !elf.interpreter.empty();
    if (!program && elf.type != 3) continue;
    // Libraries of a family (CUDA libraries above; driver files, stubs) are not consumers here.
    if (rules.Classify(catalog::LibraryBaseName(util::BaseName(path)))) continue;
    if (std::any_of(elf.needed.begin(), elf.needed.end(), links_cuda))
      add(path, program ? "executable" : "library", nullptr);
  }
  auto lookup = [&catalog](std::string_view p) { return catalog.Elf(p); };
  loader::Options plain = options;
  plain.dlopen = ForBuild(options.dlopen, nullptr);
  // One budget for every consumer's link map: together they are bounded, not each alone.
  if (!plain.budget)
    plain.budget = std::make_shared<loader::Budget>(loader::Budget{options.limits.loader_work});
  std::vector<Consumer> out;
  std::map<std::pair<std::string, size_t>, bool> fallbacks;
  for (auto& root : roots) {
    loader::Options own = plain;
    if (root.framework) own.dlopen = ForBuild(options.dlopen, &root.framework->build);
    own.preload = Preloads(image.tree, catalog, knowledge, root.path, options, fallbacks);
    Consumer c;
    c.path = root.path;
    c.role = root.role;
    c.graph = loader::Load(image.tree, lookup, root.path, own);
    if (c.graph.objects.empty()) continue;
    c.package = PackageLabel(catalog, root.path);
    c.optional = Optional(catalog, knowledge, root.path);
    out.push_back(std::move(c));
  }
  for (Consumer& c : out) c.not_runnable = NotRunnable(c.graph, rules, file_names);
  return out;
}

}  // namespace imgcheck::rules

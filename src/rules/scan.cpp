#include "rules/scan.h"

#include <algorithm>
#include <map>
#include <set>

#include "catalog/metadata.h"
#include "rules/context.h"
#include "util/path.h"

namespace imgcheck::rules {

namespace {

bool IsCudnnShim(std::string_view vendored_soname, int* major) {
  constexpr std::string_view kPrefix = "libcudnn.so.";
  std::string soname = catalog::UnvendoredName(vendored_soname);
  if (!soname.starts_with(kPrefix)) return false;
  auto v = Version::Parse(std::string_view(soname).substr(kPrefix.size()));
  if (!v) return false;
  *major = v->major();
  return true;
}

// The dlopen rules as they apply to objects of one framework build: a name with "{cudnn_major}"
// (TensorFlow's dso_loader opens libcudnn.so.<the major it was built with>) gets the major from
// the framework's build facts; without such facts (or outside a framework) the name is dropped.
std::vector<loader::DlopenRule> ForBuild(const std::vector<loader::DlopenRule>& rules,
                                         const catalog::BuildFacts* facts) {
  constexpr std::string_view kCudnnMajor = "{cudnn_major}";
  std::optional<Version> cudnn;
  if (facts != nullptr)
    for (const char* key : {"cudnn_version", "cudnn"})
      if (auto it = facts->find(key); it != facts->end() && !cudnn)
        cudnn = Version::Parse(it->second);
  std::vector<loader::DlopenRule> out;
  for (loader::DlopenRule rule : rules) {
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
      if (it->first.find(".so") != std::string::npos && it->second.type == 3)
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
    if (owner && elf.type == 3 && vendoring.count(owner->name) &&
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

// ---- Context

Context::Context(const ScanInput& input)
    : in(input), cat(*input.catalog), k(*input.knowledge), tree(input.image->tree) {
  for (const auto& c : cat.components) {
    using catalog::ComponentKind;
    if (c.deleted ||
        !(c.kind == ComponentKind::kCudaLibrary || c.kind == ComponentKind::kDriverLibrary ||
          c.kind == ComponentKind::kDriverStub || c.kind == ComponentKind::kCompatLibrary))
      continue;
    by_path_.emplace(c.path, &c);
  }
  for (const Consumer& c : in.consumers)
    if (c.not_runnable.empty()) consumers_.push_back(&c);
  auto lookup = [this](std::string_view p) { return cat.Elf(p); };
  std::set<std::tuple<std::string, std::string, int>> seen;
  for (const Consumer* consumer_ptr : consumers_) {
    const Consumer& consumer = *consumer_ptr;
    const auto& objects = consumer.graph.objects;
    for (size_t i = 0; i < objects.size(); ++i) {
      std::vector<loader::Resolution> rs = objects[i].resolutions;
      int major = 0;
      const std::string soname = objects[i].elf ? objects[i].elf->soname : "";
      if (IsCudnnShim(soname, &major)) {
        for (const auto& set : k.cudnn_sublibraries()) {
          if (set.major != major) continue;
          for (const auto& base : set.libraries) {
            std::string name = base + ".so." + std::to_string(major);
            // Under any of the names it was tried by (libcudnn_graph.so.9.1.0, ...).
            bool listed = std::any_of(rs.begin(), rs.end(), [&](const auto& r) {
              return catalog::LibraryBaseName(util::BaseName(r.name)) == base;
            });
            if (!listed)
              rs.push_back(loader::Resolve(tree, lookup, consumer.graph, static_cast<int>(i), name,
                                           loader::Kind::kDlopen, in.options));
          }
        }
      }
      for (auto& r : rs)
        if (seen.emplace(objects[i].real_path, r.name, static_cast<int>(r.kind)).second)
          resolutions_.push_back({&consumer, static_cast<int>(i), std::move(r)});
    }
  }
}

const catalog::Component* Context::LibraryAt(std::string_view real_path) const {
  auto it = by_path_.find(real_path);
  return it == by_path_.end() ? nullptr : it->second;
}

std::string Context::FamilyOf(std::string_view name) const {
  std::string_view base = util::BaseName(name).empty() ? name : util::BaseName(name);
  if (size_t so = base.find(".so"); so != std::string_view::npos) base = base.substr(0, so);
  const catalog::Family* f = k.libraries().Classify(base);
  return f ? f->family : "";
}

std::optional<Version> Context::VersionOf(const catalog::Component* c, size_t precision) const {
  if (!c || c->version.empty()) return std::nullopt;
  auto v = Version::Parse(c->version);
  if (!v || v->size() < precision) return std::nullopt;
  return v;
}

std::optional<Version> Context::FrameworkVersion(const catalog::Component& fw) const {
  for (const std::string* text : {&fw.version, fw.owner ? &fw.owner->version : nullptr}) {
    if (!text || text->empty()) continue;
    if (auto v = Version::Parse(*text); v && v->size() >= 2) return v;
  }
  return std::nullopt;
}

std::vector<const Consumer*> Context::ConsumersOf(const catalog::Component& fw) const {
  std::string dir = FrameworkPackageDir(fw) + "/";
  std::vector<const Consumer*> out;
  for (const Consumer* c : consumers_)
    if (c->path.starts_with(dir)) out.push_back(c);
  return out;
}

const catalog::Component* Context::Dist(std::string_view name) const {
  for (const auto* c : cat.Find(catalog::ComponentKind::kPythonDist, name))
    if (!c->deleted) return c;
  return nullptr;
}

std::vector<std::pair<const Consumer*, int>> Context::Loaded(std::string_view real_path) const {
  std::vector<std::pair<const Consumer*, int>> out;
  for (const Consumer* c : consumers_) {
    int i = c->graph.Find(real_path);
    if (i >= 0) out.emplace_back(c, i);
  }
  return out;
}

std::vector<Context::LoadedLibrary> Context::LoadedWithPrefix(
    const std::vector<const Consumer*>& consumers, std::string_view prefix) const {
  std::vector<LoadedLibrary> out;
  std::set<std::string> seen;
  for (const Consumer* c : consumers) {
    const auto& objects = c->graph.objects;
    for (size_t i = 0; i < objects.size(); ++i) {
      const auto& o = objects[i];
      bool match = o.elf && o.elf->soname.starts_with(prefix);
      for (const auto& n : o.names) match = match || n.starts_with(prefix);
      if (!match || !seen.insert(o.real_path).second) continue;
      LoadedLibrary l{c, static_cast<int>(i), nullptr, LibraryAt(o.real_path)};
      if (o.loader >= 0 && static_cast<size_t>(o.loader) < objects.size())
        for (const auto& r : objects[static_cast<size_t>(o.loader)].resolutions)
          if (r.found() && r.real_path == o.real_path) {
            l.how = &r;
            break;
          }
      out.push_back(l);
    }
  }
  return out;
}

LayerRef Context::Layer(int index) const {
  LayerRef ref;
  if (const image::Layer* l = cat.Layer(index)) {
    ref.index = index;
    ref.digest = l->digest;
    ref.created_by = l->created_by;
  }
  return ref;
}

Finding Context::Make(std::string_view rule, std::string message, std::vector<std::string> paths,
                      int layer) const {
  Finding f;
  f.rule = std::string(rule);
  if (const RuleInfo* info = k.Rule(rule)) {
    f.name = info->name;
    f.severity = info->severity;
    f.remediation = info->remediation;
  }
  f.message = std::move(message);
  if (layer == -2) {
    layer = -1;
    if (!paths.empty()) {
      if (const image::Node* n = tree.Find(paths[0])) layer = n->layer;
    }
  }
  f.layer = Layer(layer);
  f.paths = std::move(paths);
  return f;
}

Evidence ResolvedEvidence(const loader::Resolution& r) { return {"resolved " + r.name, "", r}; }

std::string UnresolvedText(const loader::Resolution& r) {
  if (r.status == loader::Status::kError) return "error: " + r.error;
  std::string s = "not found; tried";
  std::set<std::string> dirs;
  for (const auto& a : r.tried) {
    std::string d(util::DirName(a.path));
    if (dirs.insert(d).second) s += " " + d;
  }
  return dirs.empty() ? "not found" : s;
}

std::string Context::Searched(const loader::Resolution& r) {
  std::string searched;
  for (const auto& a : r.tried) {
    if (!searched.empty()) searched += ", ";
    searched += a.path + " (" + std::string(loader::OutcomeName(a.outcome)) + ")";
  }
  return searched;
}

void Context::AddComponentEvidence(Finding& f, const catalog::Component& c,
                                   const std::string& what) {
  f.evidence.push_back({what + "file", c.path + " (layer " + std::to_string(c.layer) + ")"});
  for (const auto& v : c.versions)
    f.evidence.push_back(
        {what + "version " + v.value, std::string(catalog::SourceName(v.source)) + ": " + v.path});
  f.evidence.push_back(
      {what + "owner", c.owner ? std::string(catalog::ManagerName(c.owner->manager)) + " " +
                                     c.owner->name + " " + c.owner->version + " (" +
                                     c.owner->metadata + ")"
                               : "none: no dpkg list, pip RECORD or conda-meta file names it"});
}

// ---- running

std::vector<std::string> ImplementedRules() {
  std::vector<std::string> ids;
  for (const auto& list : {CudnnChecks(), LoaderChecks(), DriverChecks()})
    for (const auto& c : list) ids.emplace_back(c.rule);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<Finding> RunChecks(const ScanInput& input) {
  Context ctx(input);
  std::vector<Check> all;
  for (auto list : {CudnnChecks(), LoaderChecks(), DriverChecks()})
    all.insert(all.end(), list.begin(), list.end());
  std::sort(all.begin(), all.end(), [](const Check& a, const Check& b) { return a.rule < b.rule; });
  for (const auto& c : all) c.run(ctx);
  std::stable_sort(ctx.findings.begin(), ctx.findings.end(),
                   [](const Finding& a, const Finding& b) {
                     if (a.severity != b.severity) return a.severity > b.severity;
                     if (a.rule != b.rule) return a.rule < b.rule;
                     return a.paths < b.paths;
                   });
  return std::move(ctx.findings);
}

}  // namespace imgcheck::rules

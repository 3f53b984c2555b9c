#include "rules/scan.h"

#include <algorithm>
#include <set>

#include "rules/context.h"
#include "util/path.h"

namespace imgcheck::rules {

namespace {

bool IsCudnnShim(std::string_view soname, int* major) {
  constexpr std::string_view kPrefix = "libcudnn.so.";
  if (!soname.starts_with(kPrefix)) return false;
  auto v = Version::Parse(soname.substr(kPrefix.size()));
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
    std::vector<std::string> names;
    for (std::string& name : rule.names) {
      size_t at = name.find(kCudnnMajor);
      if (at == std::string::npos) {
        names.push_back(std::move(name));
      } else if (cudnn) {
        names.push_back(name.replace(at, kCudnnMajor.size(), std::to_string(cudnn->major())));
      }
    }
    rule.names = std::move(names);
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
  return o;
}

std::string FrameworkPackageDir(const catalog::Component& fw) {
  if (size_t at = fw.path.find("-packages/"); at != std::string::npos) {
    size_t end = fw.path.find('/', at + 10);
    if (end != std::string::npos) return fw.path.substr(0, end);
  }
  return std::string(util::DirName(fw.path));
}

std::vector<Consumer> LoadConsumers(const image::Image& image, const catalog::Catalog& catalog,
                                    const loader::Options& options, size_t limit) {
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
  for (const auto& [path, elf] : catalog.elves()) {
    if (elf.interpreter.empty()) continue;
    bool cuda = std::any_of(elf.needed.begin(), elf.needed.end(), [](const std::string& n) {
      return n.starts_with("libcu") || n.starts_with("libnv") || n.starts_with("libnccl");
    });
    if (cuda) add(path, "executable", nullptr);
  }
  auto lookup = [&catalog](std::string_view p) { return catalog.Elf(p); };
  loader::Options plain = options;
  plain.dlopen = ForBuild(options.dlopen, nullptr);
  std::vector<Consumer> out;
  for (auto& root : roots) {
    loader::Options built;
    if (root.framework) {
      built = options;
      built.dlopen = ForBuild(options.dlopen, &root.framework->build);
    }
    Consumer c{root.path, root.role,
               loader::Load(image.tree, lookup, root.path, root.framework ? built : plain)};
    if (!c.graph.objects.empty()) out.push_back(std::move(c));
  }
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
  auto lookup = [this](std::string_view p) { return cat.Elf(p); };
  std::set<std::tuple<std::string, std::string, int>> seen;
  for (const Consumer& consumer : in.consumers) {
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
            bool listed =
                std::any_of(rs.begin(), rs.end(), [&](const auto& r) { return r.name == name; });
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
  for (const auto& c : in.consumers)
    if (c.path.starts_with(dir)) out.push_back(&c);
  return out;
}

const catalog::Component* Context::Dist(std::string_view name) const {
  for (const auto* c : cat.Find(catalog::ComponentKind::kPythonDist, name))
    if (!c->deleted) return c;
  return nullptr;
}

std::vector<std::pair<const Consumer*, int>> Context::Loaded(std::string_view real_path) const {
  std::vector<std::pair<const Consumer*, int>> out;
  for (const auto& c : in.consumers) {
    int i = c.graph.Find(real_path);
    if (i >= 0) out.emplace_back(&c, i);
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

std::vector<const Consumer*> Context::AllConsumers() const {
  std::vector<const Consumer*> out;
  for (const auto& c : in.consumers) out.push_back(&c);
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

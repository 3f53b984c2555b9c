// What the checks share: lookups over the catalog and the link maps.
#include "rules/context.h"

#include <set>
#include <tuple>

#include "catalog/metadata.h"
#include "util/path.h"

namespace imgcheck::rules {

bool IsCudnnShim(std::string_view vendored_soname, int* major) {
  constexpr std::string_view kPrefix = "libcudnn.so.";
  std::string soname = catalog::UnvendoredName(vendored_soname);
  if (!soname.starts_with(kPrefix)) return false;
  auto v = Version::Parse(std::string_view(soname).substr(kPrefix.size()));
  if (!v) return false;
  *major = v->major();
  return true;
}

Context::Context(const ScanInput& input)
    : input(input), catalog(*input.catalog), knowledge(*input.knowledge), tree(input.image->tree) {
  for (const auto& c : catalog.components) {
    if (!c.deleted && catalog::IsLibraryKind(c.kind)) by_path_.emplace(c.path, &c);
  }
  for (const Consumer& c : input.session.consumers())
    if (c.not_runnable.empty()) consumers_.push_back(&c);
  std::set<std::tuple<std::string, std::string, int>> seen;
  for (const Consumer* consumer_ptr : consumers_) {
    const Consumer& consumer = *consumer_ptr;
    const auto& objects = consumer.graph.objects;
    for (size_t i = 0; i < objects.size(); ++i) {
      // The object's own resolutions, then those of the sub-libraries a cuDNN shim opens that
      // the link map did not try. Copied only when first seen: each carries every path tried.
      const std::vector<loader::Resolution>& own = objects[i].resolutions;
      std::vector<loader::Resolution> added;
      int major = 0;
      const std::string soname = objects[i].elf ? objects[i].elf->soname : "";
      if (IsCudnnShim(soname, &major)) {
        for (const auto& set : knowledge.cudnn_sublibraries()) {
          if (set.major != major) continue;
          for (const auto& base : set.libraries) {
            std::string name = base + ".so." + std::to_string(major);
            // Under any of the names it was tried by (libcudnn_graph.so.9.1.0, ...).
            auto named = [&](const auto& r) {
              return catalog::LibraryBaseName(util::BaseName(r.name)) == base;
            };
            if (std::none_of(own.begin(), own.end(), named) &&
                std::none_of(added.begin(), added.end(), named))
              added.push_back(input.session.Resolve(consumer, static_cast<int>(i), name,
                                                    loader::Kind::kDlopen));
          }
        }
      }
      auto first_seen = [&](const loader::Resolution& r) {
        return seen.emplace(objects[i].real_path, r.name, static_cast<int>(r.kind)).second;
      };
      for (const loader::Resolution& r : own)
        if (first_seen(r)) resolutions_.push_back({&consumer, static_cast<int>(i), r});
      for (loader::Resolution& r : added)
        if (first_seen(r)) resolutions_.push_back({&consumer, static_cast<int>(i), std::move(r)});
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
  const catalog::Family* f = knowledge.libraries().Classify(base);
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
  std::string dir = catalog::FrameworkPackageDir(fw) + "/";
  std::vector<const Consumer*> out;
  for (const Consumer* c : consumers_)
    if (c->path.starts_with(dir)) out.push_back(c);
  return out;
}

const catalog::Component* Context::Dist(std::string_view name) const {
  for (const auto* c : catalog.Find(catalog::ComponentKind::kPythonDist, name))
    if (!c->deleted) return c;
  return nullptr;
}

bool Context::VendoredOnly(const catalog::Component& c) const {
  if (!c.owner || c.owner->manager != catalog::PackageManager::kPip) return false;
  const catalog::Family* own = knowledge.libraries().ByPackage(c.owner->manager, c.owner->name);
  if (own && own->family == c.family) return false;  // the family's own wheel
  for (const auto& [consumer, index] : Loaded(c.path)) {
    const catalog::PackageRef* by = catalog.Owner(consumer->path);
    if (!by || by->manager != c.owner->manager || by->name != c.owner->name) return false;
  }
  return true;
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
  if (const image::Layer* l = catalog.Layer(index)) {
    ref.index = index;
    ref.digest = l->digest;
    ref.created_by = l->created_by;
  }
  return ref;
}

Finding Context::Make(std::string_view rule, std::string message, std::vector<std::string> paths,
                      int layer) const {
  Finding f = MakeFinding(knowledge, rule, std::move(message));
  if (layer == kLayerOfFirstPath) {
    layer = -1;
    if (!paths.empty()) {
      if (const image::Node* n = tree.Find(paths[0])) layer = n->layer;
    }
  }
  f.layer = Layer(layer);
  f.paths = std::move(paths);
  return f;
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

ReleaseMismatch MatchRelease(const Context& ctx, const catalog::Component& dist,
                             const catalog::Component& fw) {
  ReleaseMismatch out;
  std::string fw_name = catalog::NormalizeDistName(fw.name);
  for (const catalog::Requirement& req : dist.requires_dist)
    if (req.name == fw_name && !req.Pinned().empty() && req.marker.empty() &&
        req.under_extras.empty())
      out.built_for = fw_name + "==" + req.Pinned();
  std::optional<Version> have = Version::Parse(fw.version);
  const CompanionRow* row =
      have ? ctx.knowledge.Companion(fw_name, *have, catalog::NormalizeDistName(dist.name))
           : nullptr;
  if (row) {
    out.fix = "pip install '" + dist.name + "==" + row->version.Prefix(2).str() + ".*' (the " +
              dist.name + " release built for " + fw.name + " " + row->release.Prefix(2).str() +
              ")";
  } else if (!out.built_for.empty()) {
    out.fix = "pip install '" + out.built_for + "' (the " + fw.name + " release " + dist.name +
              " " + dist.version + " was built for), or install the " + dist.name +
              " release built for " + fw.name + " " + fw.version;
  } else {
    out.fix = "install the " + dist.name + " release built for " + fw.name + " " + fw.version +
              ", or rebuild " + dist.name + " against it";
  }
  return out;
}

}  // namespace imgcheck::rules

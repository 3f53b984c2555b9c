// The probe's plan from the static scan's link maps.
#include <map>
#include <set>

#include "probe/session.h"
#include "util/path.h"

namespace imgcheck::probe {
namespace {

// The families the probe loads: cuDNN and what cuDNN needs to run a convolution.
bool WantedFamily(std::string_view family) {
  return family == "cudnn" || family == "cudart" || family == "cublas";
}

// A soname's major: "libcudnn.so.9" -> "9".
std::string SonameMajor(std::string_view soname) {
  size_t so = soname.find(".so.");
  if (so == std::string_view::npos) return "";
  std::string_view rest = soname.substr(so + 4);
  return std::string(rest.substr(0, rest.find('.')));
}

class Planner {
 public:
  explicit Planner(const rules::ScanInput& scan) : scan_(scan) {
    for (const auto& c : scan.catalog->components)
      if (c.kind == catalog::ComponentKind::kCudaLibrary && !c.deleted)
        by_path_.emplace(c.path, &c);
  }

  void AddObject(const loader::LoadedObject& obj) {
    auto it = by_path_.find(obj.real_path);
    if (it == by_path_.end() || !WantedFamily(it->second->family)) return;
    std::string soname = obj.elf && !obj.elf->soname.empty() ? obj.elf->soname
                         : !obj.names.empty()                ? obj.names.front()
                                              : std::string(util::BaseName(obj.real_path));
    if (!seen_.insert(soname).second) return;  // the first consumer's resolution wins
    PlannedLibrary lib;
    lib.role = RoleOf(soname);
    lib.soname = soname;
    lib.image_path = obj.real_path;
    lib.layer = it->second->layer;
    lib.version = it->second->version;
    if (obj.elf) lib.needed = obj.elf->needed;
    plan_.libraries.push_back(std::move(lib));
  }

  // cuDNN's shim dlopens its sub-libraries by name when first asked: resolve each with dlopen's
  // rules from the shim (its RUNPATH, LD_LIBRARY_PATH, cache, defaults).
  void AddSublibraries(const rules::Consumer& consumer) {
    const auto& objects = consumer.graph.objects;
    for (size_t i = 0; i < objects.size(); ++i) {
      const auto& obj = objects[i];
      if (!obj.elf || RoleOf(obj.elf->soname) != "cudnn") continue;
      std::string major = SonameMajor(obj.elf->soname);
      for (const auto& set : scan_.knowledge->cudnn_sublibraries()) {
        if (std::to_string(set.major) != major) continue;
        for (const auto& base : set.libraries) {
          std::string name = base + ".so." + major;
          if (seen_.count(name)) continue;
          loader::Resolution r =
              scan_.session.Resolve(consumer, static_cast<int>(i), name, loader::Kind::kDlopen);
          if (!r.found()) continue;  // the probe's version check reports it missing
          loader::LoadedObject sub;
          sub.real_path = r.real_path;
          sub.elf = scan_.catalog->Elf(r.real_path);
          sub.names = {name};
          AddObject(sub);
        }
      }
    }
  }

  Plan Take() {
    Plan ordered;
    ordered.libraries = LoadOrder(plan_);
    return ordered;
  }

 private:
  const rules::ScanInput& scan_;
  std::map<std::string, const catalog::Component*, std::less<>> by_path_;
  std::set<std::string> seen_;
  Plan plan_;
};

}  // namespace

Plan PlanFromScan(const rules::ScanInput& scan) {
  std::vector<const rules::Consumer*> chosen;
  for (const auto* fw : scan.catalog->Find(catalog::ComponentKind::kFramework)) {
    std::string dir = catalog::FrameworkPackageDir(*fw) + "/";
    for (const auto& c : scan.session.consumers())
      if (c.path.starts_with(dir)) chosen.push_back(&c);
  }
  if (chosen.empty())
    for (const auto& c : scan.session.consumers()) chosen.push_back(&c);
  Planner p(scan);
  for (const auto* c : chosen)
    for (const auto& obj : c->graph.objects) p.AddObject(obj);
  for (const auto* c : chosen) p.AddSublibraries(*c);
  return p.Take();
}

}  // namespace imgcheck::probe

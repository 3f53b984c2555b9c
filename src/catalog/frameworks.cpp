// Frameworks: the build facts files of rules/libraries.json's framework_files (torch/version.py,
// TensorFlow's build_info.py, ...), with the pip distribution that owns each.
#include <algorithm>

#include "catalog/builder.h"
#include "catalog/metadata.h"
#include "util/path.h"

namespace imgcheck::catalog {

using image::Node;

void Builder::AddFrameworks() {
  for (const std::string& path : frameworks_) {
    const Node* node = tree_.Find(path);
    const FrameworkFile* f = rules_.Framework(path);
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
    c.name = f->framework;
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
  // Frameworks whose build facts file is absent, known by their distribution.
  std::vector<Component> by_dist;
  for (const Component& dist : cat_.components) {
    if (dist.kind != ComponentKind::kPythonDist || dist.versions.empty()) continue;
    const FrameworkDist* f = rules_.FrameworkByDist(dist.name);
    if (f == nullptr) continue;
    std::string module = f->module;
    if (module.empty()) {
      module = dist.name;
      std::replace(module.begin(), module.end(), '-', '_');
    }
    // The package directory, with a trailing '/': the framework's files are what lies under it.
    std::string dir = util::JoinPath(util::DirName(dist.path), module) + "/";
    bool described = false;  // a build facts file of it (owned by the dist or not) is there
    for (const Component& fw : cat_.components)
      described =
          described || (fw.kind == ComponentKind::kFramework &&
                        ((fw.owner && fw.owner->name == dist.name) || fw.path.starts_with(dir)));
    if (described) continue;
    Component c;
    c.kind = ComponentKind::kFramework;
    c.name = f->framework.empty() ? dist.name : f->framework;
    c.path = dir;
    c.layer = dist.layer;
    c.owner =
        PackageRef{PackageManager::kPip, dist.name, dist.versions[0].value, dist.path, dist.layer};
    c.versions.push_back(dist.versions[0]);
    by_dist.push_back(std::move(c));
  }
  for (Component& c : by_dist) cat_.components.push_back(std::move(c));
}

}  // namespace imgcheck::catalog

#include "loader/why.h"

#include <algorithm>

namespace imgcheck::loader {

namespace {

bool Same(const Resolution& a, const Resolution& b) {
  return a.consumer == b.consumer && a.name == b.name && a.kind == b.kind && a.status == b.status &&
         a.reason == b.reason && a.path == b.path && a.real_path == b.real_path;
}

}  // namespace

std::vector<WhyEntry> FindWhy(const image::Tree& tree, const std::vector<Root>& roots,
                              std::string_view target) {
  bool by_path = target.find('/') != std::string_view::npos;
  std::string real;
  if (by_path) {
    auto resolved = tree.Resolve(target);
    if (resolved) real = resolved->path;
  }
  std::vector<WhyEntry> out;
  for (const Root& root : roots) {
    if (root.graph == nullptr) continue;
    for (const Resolution* r : root.graph->Resolutions()) {
      bool match =
          by_path ? r->found() && (r->path == target || r->real_path == real) : r->name == target;
      if (!match) continue;
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const WhyEntry& e) { return Same(e.resolution, *r); });
      auto same_root = [&](const Root& e) { return e.path == root.path && e.role == root.role; };
      if (it == out.end())
        out.push_back({*r, {root}});
      else if (std::none_of(it->roots.begin(), it->roots.end(), same_root))
        it->roots.push_back(root);
    }
  }
  return out;
}

}  // namespace imgcheck::loader

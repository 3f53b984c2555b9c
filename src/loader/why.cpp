#include "loader/why.h"

#include <algorithm>
#include <sstream>

namespace imgcheck::loader {

namespace {

bool Same(const Resolution& a, const Resolution& b) {
  return a.consumer == b.consumer && a.name == b.name && a.kind == b.kind && a.status == b.status &&
         a.reason == b.reason && a.path == b.path && a.real_path == b.real_path;
}

std::string Layer(const image::Tree& tree, std::string_view path) {
  const image::Node* n = tree.Find(path);
  return n != nullptr && n->layer >= 0 ? " (layer " + std::to_string(n->layer) + ")" : "";
}

std::string How(const Resolution& r) {
  switch (r.reason) {
    case Reason::kRpath:
      return "DT_RPATH of " + r.rpath_owner + ": \"" + r.entry + "\"";
    case Reason::kRunpath:
      return "DT_RUNPATH of the consumer: \"" + r.entry + "\"";
    case Reason::kLdLibraryPath:
      return "LD_LIBRARY_PATH element \"" + r.entry + "\"" +
             (r.entry.empty() ? " (the working directory)" : "");
    case Reason::kLdCache:
      return "ld.so.cache";
    case Reason::kDefaultDir:
      return "default directory " + r.entry;
    case Reason::kDirectPath:
      return "the name is a path";
    case Reason::kAlreadyLoaded:
      return "already loaded under this name or soname";
  }
  return "";
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
      std::string label = root.role.empty() ? root.path : root.path + " (" + root.role + ")";
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const WhyEntry& e) { return Same(e.resolution, *r); });
      if (it == out.end())
        out.push_back({*r, {label}});
      else if (std::find(it->roots.begin(), it->roots.end(), label) == it->roots.end())
        it->roots.push_back(label);
    }
  }
  return out;
}

std::string ExplainWhy(const image::Tree& tree, std::string_view target,
                       const std::vector<WhyEntry>& entries) {
  std::ostringstream s;
  if (entries.empty()) {
    s << std::string(target) << ": no object in the image's link maps requests it\n";
    return s.str();
  }
  for (const WhyEntry& e : entries) {
    const Resolution& r = e.resolution;
    s << r.name << "\n  " << (r.kind == Kind::kDlopen ? "dlopen by " : "DT_NEEDED of ")
      << r.consumer << Layer(tree, r.consumer) << "\n";
    for (const Attempt& a : r.tried) {
      if (a.outcome == Outcome::kFound || a.outcome == Outcome::kMissing) continue;
      s << "  skipped " << a.path << ": " << OutcomeName(a.outcome) << " (" << ReasonName(a.phase)
        << ")\n";
    }
    if (r.status == Status::kFound) {
      s << "  => " << r.path << "  [" << ReasonName(r.reason) << ": " << How(r) << "]\n";
      if (r.real_path != r.path) s << "     real file " << r.real_path << "\n";
      if (const image::Node* n = tree.Find(r.real_path); n != nullptr && n->layer >= 0)
        s << "     file from layer " << n->layer << "\n";
    } else {
      s << "  => " << (r.status == Status::kError ? "ERROR: " + r.error : "not found")
        << "; tried, in order:\n";
      for (const Attempt& a : r.tried) {
        s << "     " << ReasonName(a.phase) << "  "
          << (a.path.empty() ? "(no entry for " + r.name + ")" : a.path);
        if (!a.entry.empty() && a.entry != a.path && a.phase != Reason::kLdCache &&
            a.phase != Reason::kDefaultDir)
          s << "  from \"" << a.entry << "\"";
        s << "  " << OutcomeName(a.outcome) << "\n";
      }
      if (r.tried.empty()) s << "     (nothing: no search path applies)\n";
    }
    s << "  in the link map of " << e.roots.front();
    for (size_t i = 1; i < e.roots.size(); ++i) s << ",\n                     " << e.roots[i];
    s << "\n";
  }
  return s.str();
}

}  // namespace imgcheck::loader

#include "report/why.h"

#include <sstream>

#include "report/escape.h"

namespace imgcheck::report {

namespace {

using loader::Attempt;
using loader::Kind;
using loader::Outcome;
using loader::Reason;
using loader::Resolution;
using loader::Status;
using loader::WhyEntry;

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

std::string RenderWhy(const image::Tree& tree, std::string_view target,
                      const std::vector<loader::WhyEntry>& entries) {
  std::ostringstream s;
  if (entries.empty()) {
    s << std::string(target) << ": no object in the image's link maps requests it\n";
  }
  for (const WhyEntry& e : entries) {
    const Resolution& r = e.resolution;
    s << r.name << "\n  " << (r.kind == Kind::kDlopen ? "dlopen by " : "DT_NEEDED of ")
      << r.consumer << Layer(tree, r.consumer) << "\n";
    for (const Attempt& a : r.tried) {
      if (a.outcome == Outcome::kFound || a.outcome == Outcome::kMissing) continue;
      s << "  skipped " << a.path << ": " << loader::OutcomeName(a.outcome) << " ("
        << loader::ReasonName(a.phase) << ")\n";
    }
    if (r.status == Status::kFound) {
      s << "  => " << r.path << "  [" << loader::ReasonName(r.reason) << ": " << How(r) << "]\n";
      if (r.real_path != r.path) s << "     real file " << r.real_path << "\n";
      if (const image::Node* n = tree.Find(r.real_path); n != nullptr && n->layer >= 0)
        s << "     file from layer " << n->layer << "\n";
    } else {
      s << "  => " << (r.status == Status::kError ? "ERROR: " + r.error : "not found")
        << "; tried, in order:\n";
      for (const Attempt& a : r.tried) {
        s << "     " << loader::ReasonName(a.phase) << "  "
          << (a.path.empty() ? "(no entry for " + r.name + ")" : a.path);
        if (!a.entry.empty() && a.entry != a.path && a.phase != Reason::kLdCache &&
            a.phase != Reason::kDefaultDir)
          s << "  from \"" << a.entry << "\"";
        s << "  " << loader::OutcomeName(a.outcome) << "\n";
      }
      if (r.tried.empty()) s << "     (nothing: no search path applies)\n";
    }
    s << "  in the link map of " << e.roots.front();
    for (size_t i = 1; i < e.roots.size(); ++i) s << ",\n                     " << e.roots[i];
    s << "\n";
  }
  // Line by line: the text's own newlines stay, a name's bytes cannot drive the terminal.
  return VisibleLines(s.str());
}

}  // namespace imgcheck::report

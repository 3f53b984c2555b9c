#include "report/why.h"

#include <nlohmann/json.hpp>
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

std::string_view StatusName(loader::Status status) {
  switch (status) {
    case Status::kFound:
      return "found";
    case Status::kNotFound:
      return "not-found";
    case Status::kError:
      return "error";
  }
  return "";
}

nlohmann::ordered_json LayerJson(const LayerOf& layer_of, const std::string& path) {
  rules::LayerRef layer = layer_of ? layer_of(path) : rules::LayerRef{};
  if (layer.index < 0) return nullptr;
  return {{"index", layer.index}, {"digest", layer.digest}, {"created_by", layer.created_by}};
}

}  // namespace

std::string RenderWhyJson(std::string_view target, const std::vector<loader::WhyEntry>& entries,
                          const LayerOf& layer_of) {
  nlohmann::ordered_json resolutions = nlohmann::ordered_json::array();
  for (const WhyEntry& e : entries) {
    const Resolution& r = e.resolution;
    nlohmann::ordered_json tried = nlohmann::ordered_json::array();
    for (const Attempt& a : r.tried)
      tried.push_back({{"phase", loader::ReasonName(a.phase)},
                       {"entry", a.entry},
                       {"path", a.path},
                       {"outcome", loader::OutcomeName(a.outcome)}});
    nlohmann::ordered_json roots = nlohmann::ordered_json::array();
    for (const loader::Root& root : e.roots)
      roots.push_back({{"path", root.path}, {"role", root.role}});
    nlohmann::ordered_json j;
    j["name"] = r.name;
    j["kind"] = r.kind == Kind::kDlopen ? "dlopen" : "DT_NEEDED";
    j["consumer"] = {{"path", r.consumer}, {"layer", LayerJson(layer_of, r.consumer)}};
    j["status"] = StatusName(r.status);
    j["reason"] = r.found() ? nlohmann::ordered_json(loader::ReasonName(r.reason)) : nullptr;
    j["path"] = r.path;
    j["real_path"] = r.real_path;
    j["entry"] = r.entry;
    j["rpath_owner"] = r.rpath_owner;
    j["error"] = r.error;
    j["layer"] = r.found() ? LayerJson(layer_of, r.real_path) : nullptr;
    j["tried"] = std::move(tried);
    j["roots"] = std::move(roots);
    resolutions.push_back(std::move(j));
  }
  nlohmann::ordered_json out = {{"target", target}, {"resolutions", std::move(resolutions)}};
  return DumpJson(out, 2) + "\n";
}

std::string RenderWhy(const image::Image& img, std::string_view target,
                      const std::vector<loader::WhyEntry>& entries, WhyFormat format) {
  switch (format) {
    case WhyFormat::kText:
      return RenderWhy(img.tree, target, entries);
    case WhyFormat::kJson:
      return RenderWhyJson(target, entries, ImageLayers(img));
    case WhyFormat::kDot:
      return DotChain(BuildChain(entries, ImageLayers(img)), "imgcheck why " + std::string(target));
    case WhyFormat::kMermaid:
      return MermaidChain(BuildChain(entries, ImageLayers(img)));
  }
  return "";
}

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
    s << "  in the link map of " << e.roots.front().Label();
    for (size_t i = 1; i < e.roots.size(); ++i)
      s << ",\n                     " << e.roots[i].Label();
    s << "\n";
  }
  // Line by line: the text's own newlines stay, a name's bytes cannot drive the terminal.
  return VisibleLines(s.str());
}

}  // namespace imgcheck::report

#include "report/graph.h"

#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "report/escape.h"

namespace imgcheck::report {

namespace {

using loader::Attempt;
using loader::Outcome;
using loader::Reason;
using loader::Resolution;

// "layer 3 sha256:0123456789ab": the index and enough of the digest to find the layer.
std::string LayerLine(const rules::LayerRef& layer) {
  std::string line = "layer " + std::to_string(layer.index);
  if (!layer.digest.empty()) line += " " + layer.digest.substr(0, layer.digest.find(':') + 13);
  return line;
}

// Whether the search entry adds to the candidate's path (as the text of `why` shows it).
bool ShowEntry(Reason phase, const std::string& entry, const std::string& path) {
  return !entry.empty() && entry != path && phase != Reason::kLdCache &&
         phase != Reason::kDefaultDir;
}

class ChainBuilder {
 public:
  explicit ChainBuilder(const LayerOf& layer_of) : layer_of_(&layer_of) {}

  void Add(const loader::WhyEntry& e) {
    const Resolution& r = e.resolution;
    size_t consumer = Shared(ChainNodeKind::kConsumer, r.consumer);
    for (const loader::Root& root : e.roots) {
      if (root.path == r.consumer) {
        AddLine(consumer, root.role);
        continue;
      }
      size_t from = Shared(ChainNodeKind::kConsumer, root.path);
      AddLine(from, root.role);
      Edge(from, consumer, ChainEdgeKind::kLinkMap, {"link map"}, false);
    }
    bool failing = !r.found();
    size_t name = Node(ChainNodeKind::kName, {r.name}, {});
    Edge(consumer, name, ChainEdgeKind::kRequest,
         {r.kind == loader::Kind::kDlopen ? "dlopen" : "DT_NEEDED"}, failing);
    for (size_t i = 0; i < r.tried.size(); ++i) {
      const Attempt& a = r.tried[i];
      if (a.outcome == Outcome::kFound) continue;
      std::string what = a.path.empty() ? "(no entry for " + r.name + ")" : a.path;
      size_t tried =
          Node(ChainNodeKind::kTried, {what, std::string(loader::OutcomeName(a.outcome))}, {});
      Edge(name, tried, ChainEdgeKind::kPassedOver, {Step(i, a.phase, a.entry, a.path)}, false);
    }
    size_t step = r.tried.empty() ? 0 : r.tried.size() - 1;
    if (r.found()) {
      size_t file = Shared(ChainNodeKind::kFile, r.real_path);
      std::vector<std::string> how = {Step(step, r.reason, r.entry, r.path)};
      if (r.reason == Reason::kRpath && r.rpath_owner != r.consumer)
        how.push_back("DT_RPATH of " + r.rpath_owner);
      if (r.path != r.real_path) how.push_back("opened as " + r.path);
      Edge(name, file, ChainEdgeKind::kAnswer, std::move(how), false);
    } else {
      std::vector<std::string> lines = {r.status == loader::Status::kError ? "ERROR" : "not found"};
      if (!r.error.empty()) lines.push_back(r.error);
      size_t failure = Node(ChainNodeKind::kFailure, std::move(lines), {});
      Edge(name, failure, ChainEdgeKind::kAnswer,
           {r.tried.empty() ? "nothing to try" : std::to_string(r.tried.size()) + " tried"}, true);
    }
  }

  Chain Take() { return std::move(chain_); }

 private:
  // "2. rpath \"$ORIGIN/../lib\"": the attempt's place in the search and its phase.
  std::string Step(size_t i, Reason phase, const std::string& entry, const std::string& path) {
    std::string s = std::to_string(i + 1) + ". " + std::string(loader::ReasonName(phase));
    if (ShowEntry(phase, entry, path)) s += " \"" + entry + "\"";
    return s;
  }

  size_t Node(ChainNodeKind kind, std::vector<std::string> lines, rules::LayerRef layer) {
    if (layer.index >= 0) lines.push_back(LayerLine(layer));
    chain_.nodes.push_back({kind, std::move(lines), std::move(layer)});
    return chain_.nodes.size() - 1;
  }

  // The one node of this kind for `path` (consumers, files), with its layer.
  size_t Shared(ChainNodeKind kind, const std::string& path) {
    auto [it, added] = shared_.try_emplace({kind, path}, chain_.nodes.size());
    if (added) Node(kind, {path}, *layer_of_ ? (*layer_of_)(path) : rules::LayerRef{});
    return it->second;
  }

  // A root's role ("framework torch") under its path, once.
  void AddLine(size_t node, const std::string& line) {
    std::vector<std::string>& lines = chain_.nodes[node].lines;
    if (line.empty()) return;
    for (size_t i = 1; i < lines.size(); ++i)
      if (lines[i] == line) return;
    lines.insert(lines.begin() + 1, line);
  }

  void Edge(size_t from, size_t to, ChainEdgeKind kind, std::vector<std::string> lines,
            bool failing) {
    if (kind == ChainEdgeKind::kLinkMap && !link_maps_.emplace(from, to).second) return;
    chain_.edges.push_back({from, to, kind, std::move(lines), failing});
  }

  const LayerOf* layer_of_;
  Chain chain_;
  std::map<std::pair<ChainNodeKind, std::string>, size_t> shared_;
  std::set<std::pair<size_t, size_t>> link_maps_;
};

// A DOT quoted string's contents (Graphviz "escString"): '"' and '\' escaped, lines joined by \n.
std::string DotText(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    if (!out.empty()) out += "\\n";
    for (char c : Visible(line)) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
  }
  return out;
}

// A Mermaid quoted label's contents: each character Mermaid's parser (an edge label's '|'), its
// entity codes ('#'), its directives ("%%{"), Markdown strings ('`') or the HTML label could
// take as markup is an entity code; lines joined by <br>.
std::string MermaidText(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    if (!out.empty()) out += "<br>";
    for (char c : Visible(line)) {
      switch (c) {
        case '"':
          out += "#quot;";
          break;
        case '#':
        case '%':
        case '<':
        case '>':
        case '&':
        case '`':
        case '|':
          out += "#" + std::to_string(static_cast<int>(c)) + ";";
          break;
        default:
          out += c;
      }
    }
  }
  return out;
}

std::string_view KindName(ChainNodeKind kind) {
  switch (kind) {
    case ChainNodeKind::kConsumer:
      return "consumer";
    case ChainNodeKind::kName:
      return "name";
    case ChainNodeKind::kTried:
      return "tried";
    case ChainNodeKind::kFile:
      return "file";
    case ChainNodeKind::kFailure:
      return "failure";
  }
  return "";
}

std::string_view DotNodeStyle(ChainNodeKind kind) {
  switch (kind) {
    case ChainNodeKind::kConsumer:
      return "shape=box";
    case ChainNodeKind::kName:
      return "shape=ellipse";
    case ChainNodeKind::kTried:
      return "shape=box, style=dashed, color=gray40, fontcolor=gray40";
    case ChainNodeKind::kFile:
      return "shape=box, style=bold, color=darkgreen";
    case ChainNodeKind::kFailure:
      return "shape=octagon, style=bold, color=red, fontcolor=red";
  }
  return "";
}

// Failing edges thick, the candidates passed over and the link maps dotted.
std::string_view MermaidArrow(const ChainEdge& e) {
  if (e.failing) return "==>";
  if (e.kind == ChainEdgeKind::kPassedOver || e.kind == ChainEdgeKind::kLinkMap) return "-.->";
  return "-->";
}

}  // namespace

LayerOf ImageLayers(const image::Image& img) {
  return [&img](std::string_view path) {
    rules::LayerRef ref;
    const image::Node* n = img.tree.Find(path);
    if (n == nullptr || n->layer < 0) return ref;
    ref.index = n->layer;
    for (const image::Layer& l : img.layers)
      if (l.index == n->layer) {
        ref.digest = l.digest;
        ref.created_by = l.created_by;
      }
    return ref;
  };
}

Chain BuildChain(const std::vector<loader::WhyEntry>& entries, const LayerOf& layer_of) {
  ChainBuilder builder(layer_of);
  for (const loader::WhyEntry& e : entries) builder.Add(e);
  return builder.Take();
}

std::string DotChain(const Chain& chain, std::string_view title) {
  std::ostringstream s;
  s << "digraph \"imgcheck why\" {\n"
    << "  label=\"" << DotText({std::string(title)}) << "\";\n"
    << "  labelloc=t;\n  rankdir=LR;\n";
  for (size_t i = 0; i < chain.nodes.size(); ++i) {
    const ChainNode& n = chain.nodes[i];
    s << "  n" << i << " [label=\"" << DotText(n.lines) << "\", class=\"" << KindName(n.kind)
      << "\", " << DotNodeStyle(n.kind) << "];\n";
  }
  for (const ChainEdge& e : chain.edges) {
    s << "  n" << e.from << " -> n" << e.to << " [label=\"" << DotText(e.lines) << "\"";
    if (e.failing)
      s << ", class=\"failing\", color=red, fontcolor=red, penwidth=2, style=bold";
    else if (e.kind == ChainEdgeKind::kPassedOver)
      s << ", style=dashed, color=gray40, fontcolor=gray40";
    else if (e.kind == ChainEdgeKind::kLinkMap)
      s << ", style=dotted";
    s << "];\n";
  }
  s << "}\n";
  return s.str();
}

std::string MermaidChain(const Chain& chain) {
  std::ostringstream s;
  s << "flowchart LR\n";
  for (size_t i = 0; i < chain.nodes.size(); ++i) {
    const ChainNode& n = chain.nodes[i];
    bool round = n.kind == ChainNodeKind::kName;
    s << "  n" << i << (round ? "([\"" : "[\"") << MermaidText(n.lines) << (round ? "\"])" : "\"]")
      << ":::" << KindName(n.kind) << "\n";
  }
  std::string failing;
  for (size_t i = 0; i < chain.edges.size(); ++i) {
    const ChainEdge& e = chain.edges[i];
    s << "  n" << e.from << " " << MermaidArrow(e) << "|\"" << MermaidText(e.lines) << "\"| n"
      << e.to << "\n";
    if (e.failing) failing += (failing.empty() ? "" : ",") + std::to_string(i);
  }
  s << "  classDef consumer stroke-width:2px\n"
    << "  classDef name fill:#eef\n"
    << "  classDef tried stroke-dasharray:4 3,color:#666\n"
    << "  classDef file stroke:#060,stroke-width:2px\n"
    << "  classDef failure stroke:#d00,color:#d00,stroke-width:2px\n";
  if (!failing.empty()) s << "  linkStyle " << failing << " stroke:#d00,stroke-width:3px\n";
  return s.str();
}

std::string MermaidChain(const loader::Resolution& r, const LayerOf& layer_of) {
  return MermaidChain(BuildChain({{r, {}}}, layer_of));
}

}  // namespace imgcheck::report

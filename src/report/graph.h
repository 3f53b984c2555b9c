// A load chain as a graph: who asked for a library, by which name, each place the loader looked
// in vain, and the file that answered (or that nothing did), each node with its layer. Built once
// from the loader's resolutions, drawn as Graphviz DOT or as a Mermaid flowchart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"
#include "loader/why.h"
#include "rules/finding.h"

namespace imgcheck::report {

/// The layer that wrote a path of the image (index -1: none, or unknown).
using LayerOf = std::function<rules::LayerRef(std::string_view path)>;
/// LayerOf for `img`: the layer of the tree's node at the path, with its digest and history
/// line. `img` must outlive the result.
LayerOf ImageLayers(const image::Image& img);

enum class ChainNodeKind : uint8_t {
  kConsumer,  ///< an object that requests the name, or the root of a link map that holds it
  kName,      ///< the name as one consumer requests it
  kTried,     ///< a candidate the search passed over
  kFile,      ///< the file that answered
  kFailure,   ///< "not found", or ld.so's error
};

struct ChainNode {
  ChainNodeKind kind = ChainNodeKind::kName;
  /// The lines of its label, as raw bytes from the image: the renderers escape them.
  std::vector<std::string> lines;
  rules::LayerRef layer;  ///< consumers and files; index -1 elsewhere
};

enum class ChainEdgeKind : uint8_t {
  kLinkMap,     ///< a root to a consumer its link map holds
  kRequest,     ///< a consumer to the name it requests (DT_NEEDED or dlopen)
  kPassedOver,  ///< a name to a candidate the search passed over
  kAnswer,      ///< a name to the file that answered, or to its kFailure node
};

struct ChainEdge {
  size_t from = 0, to = 0;  ///< indexes into Chain::nodes
  ChainEdgeKind kind = ChainEdgeKind::kRequest;
  std::vector<std::string> lines;  ///< its label, raw, as ChainNode::lines
  bool failing = false;            ///< on the way to a name that did not resolve
};

/// Nodes in the order first met, edges in search order. Rendering adds no facts.
struct Chain {
  std::vector<ChainNode> nodes;
  std::vector<ChainEdge> edges;
};

/// The chain of every resolution in `entries` (loader::FindWhy): one node per consumer, per
/// file and per root of a link map, shared between entries; one per requested name and per
/// candidate tried, for each resolution. A resolution that failed has its edges marked failing
/// and ends in a kFailure node. `layer_of` may be empty: no layers then.
Chain BuildChain(const std::vector<loader::WhyEntry>& entries, const LayerOf& layer_of = {});

/// Graphviz DOT ("digraph"): `title` as the graph's label, nodes n0, n1, ... with quoted,
/// escaped labels, failing edges red and bold with class "failing".
std::string DotChain(const Chain& chain, std::string_view title);
/// A Mermaid flowchart (no Markdown fence around it): nodes n0, n1, ... with quoted labels in
/// which every character Mermaid or HTML could read ('"', '#', '%', '<', '>', '&', '`', '|') is an
/// entity code, so a name can neither end the label nor the fence of the Markdown around it.
/// Failing edges thick and red (linkStyle).
std::string MermaidChain(const Chain& chain);
/// The Mermaid flowchart of one resolution (a finding's evidence), as MermaidChain draws it.
std::string MermaidChain(const loader::Resolution& r, const LayerOf& layer_of = {});

}  // namespace imgcheck::report

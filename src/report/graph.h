// A load chain as a Mermaid flowchart: the consumer, the name it asks for, and the file that
// answered or the failed search, each file with its layer. (Branch review-graph builds the
// full chain model, DOT too; this is the one function Markdown reports need, same signature.)
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "loader/loader.h"
#include "rules/finding.h"

namespace imgcheck::report {

/// The layer that wrote a path of the image (index -1: none, or unknown).
using LayerOf = std::function<rules::LayerRef(std::string_view path)>;

/// Label text for Mermaid: Visible, then every character Mermaid or HTML could read ('"', '#',
/// '%', '<', '>', '&', '`', '|') as an entity code ("#35;"), so a name from the image can end
/// neither the label nor the Markdown fence around it.
std::string MermaidText(std::string_view s);

/// The Mermaid flowchart (no fence) of one resolution: consumer -> name -> the file that
/// answered (with how, and its layer when `layer_of` knows it), or -> the failed search (the
/// directories tried), drawn thick and red.
std::string MermaidChain(const loader::Resolution& r, const LayerOf& layer_of = {});

}  // namespace imgcheck::report

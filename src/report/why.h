// The output of `imgcheck why`: the loader's resolutions of one soname or path (loader/why.h),
// explained the way libtree does, as JSON, or as the load chain's graph (report/graph.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"
#include "image/tree.h"
#include "loader/why.h"
#include "report/graph.h"
#include "util/formats.h"

namespace imgcheck::report {

enum class WhyFormat : uint8_t { kText, kJson, kDot, kMermaid };

/// The one table of `why` output formats (--format, its help, check and completion).
inline constexpr std::array<util::FormatInfo<WhyFormat>, 4> kWhyFormats = {{
    {WhyFormat::kText, "text", "libtree-style lines, for people"},
    {WhyFormat::kJson, "json", "one JSON document: each resolution and every candidate tried"},
    {WhyFormat::kDot, "dot", "the load chain as a Graphviz graph (dot -Tsvg)"},
    {WhyFormat::kMermaid, "mermaid", "the load chain as a Mermaid flowchart, for Markdown"},
}};

/// `entries` of `target` in `format`; layers from `img`.
std::string RenderWhy(const image::Image& img, std::string_view target,
                      const std::vector<loader::WhyEntry>& entries, WhyFormat format);

/// The text `imgcheck why` prints for `entries`: per consumer, the hit (reason, search entry,
/// whose RPATH, real file and layer) or "not found" with every candidate tried and why it was
/// passed over.
std::string RenderWhy(const image::Tree& tree, std::string_view target,
                      const std::vector<loader::WhyEntry>& entries);
/// {target, resolutions: [{name, kind, consumer {path, layer}, status, reason, path, real_path,
/// entry, rpath_owner, error, layer, tried: [{phase, entry, path, outcome}], roots: [{path,
/// role}]}]}; a layer is {index, digest, created_by} or null.
std::string RenderWhyJson(std::string_view target, const std::vector<loader::WhyEntry>& entries,
                          const LayerOf& layer_of);

}  // namespace imgcheck::report

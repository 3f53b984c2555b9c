// The `layers` subcommand's output: each layer's digest, sizes, history line and what it
// changed, as a table (people) or JSON (tools). Formats only read the image.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"

namespace imgcheck::report {

struct LayersFormatInfo {
  std::string_view name;
  std::string_view summary;
  std::string (*render)(const image::Image&);
};
/// The one table of layers output formats (for --format and its help).
const std::vector<LayersFormatInfo>& LayersFormats();

/// The image header, then one row per layer, then the image's diagnostics.
std::string RenderLayersText(const image::Image& img);
/// reference, transport, digests, layers [{index, digest, diff_id, media_type, sizes,
/// created_by, added, changed, deleted}], diagnostics.
std::string RenderLayersJson(const image::Image& img);

}  // namespace imgcheck::report

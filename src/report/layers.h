// The `layers` subcommand's output: each layer's digest, sizes, history line and what it
// changed, as a table (people) or JSON (tools). Formats only read the image.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"
#include "util/formats.h"

namespace imgcheck::report {

enum class LayersFormat : uint8_t { kText, kJson };

/// The one table of layers output formats (--format, its help, check and completion).
inline constexpr std::array<util::FormatInfo<LayersFormat>, 2> kLayersFormats = {{
    {LayersFormat::kText, "text", "a table for people"},
    {LayersFormat::kJson, "json", "one JSON document"},
}};

/// The image in `format`.
std::string RenderLayers(const image::Image& img, LayersFormat format);

/// The image header, then one row per layer, then the image's diagnostics.
std::string RenderLayersText(const image::Image& img);
/// reference, transport, digests, layers [{index, digest, diff_id, media_type, sizes,
/// created_by, added, changed, deleted}], diagnostics.
std::string RenderLayersJson(const image::Image& img);

}  // namespace imgcheck::report

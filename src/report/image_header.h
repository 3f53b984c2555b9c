// The image header every document of the report stage opens with (the findings report, the
// catalog, the layers table): which image, by which digests. One shape per form, one function.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "image/image.h"
#include "report/report.h"

namespace imgcheck::report {

/// The ImageInfo of an image as it was read, with the platform asked for ("linux/amd64"; ""
/// where none was chosen).
ImageInfo ImageInfoOf(const image::Image& img, std::string platform);

/// {"reference", "transport", "manifest_digest", "config_digest", "platform"}, in that order.
nlohmann::ordered_json ImageJson(const ImageInfo& image);

/// The header block of a table for people: "image:    REF", then "manifest: DIGEST" and
/// "config:   DIGEST" where the image has them, one line each. Visible: safe for a terminal.
/// (The findings report opens with its one summary line instead, which holds the verdict.)
std::string ImageText(const ImageInfo& image);

}  // namespace imgcheck::report

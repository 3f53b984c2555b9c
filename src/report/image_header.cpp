#include "report/image_header.h"

#include <utility>

#include "report/escape.h"

namespace imgcheck::report {

ImageInfo ImageInfoOf(const image::Image& img, std::string platform) {
  return {img.reference, img.transport, img.manifest_digest, img.config_digest,
          std::move(platform)};
}

nlohmann::ordered_json ImageJson(const ImageInfo& image) {
  return {{"reference", image.reference},
          {"transport", image.transport},
          {"manifest_digest", image.manifest_digest},
          {"config_digest", image.config_digest},
          {"platform", image.platform}};
}

std::string ImageText(const ImageInfo& image) {
  std::string out = "image:    " + Visible(image.reference) + "\n";
  if (!image.manifest_digest.empty()) out += "manifest: " + Visible(image.manifest_digest) + "\n";
  if (!image.config_digest.empty()) out += "config:   " + Visible(image.config_digest) + "\n";
  return out;
}

}  // namespace imgcheck::report

// An index / manifest list, manifest or config document as the image stage reads one: JSON
// under its size limit, then every reading that applies to its kind.
#include <nlohmann/json.hpp>

#include "fuzz_input.h"
#include "image/manifest.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string what = "fuzz document";
  nlohmann::json doc;
  try {
    doc = image::ParseJson(fuzz::Bytes(data, size), image::kMaxManifestBytes, what);
  } catch (const util::Fatal&) {
    return 0;
  }
  // The same document is tried as each kind: a config is never told apart by its media type.
  try {
    image::ParseConfig(doc, what);
  } catch (const util::Fatal&) {
  }
  try {
    std::string media_type;
    if (doc.is_object() && doc.contains("mediaType") && doc["mediaType"].is_string())
      media_type = doc["mediaType"].get<std::string>();
    if (image::KindOf(media_type, doc, what) == image::DocumentKind::kIndex) {
      std::vector<image::PlatformEntry> entries = image::ParseIndex(doc, what);
      if (!entries.empty()) image::SelectPlatform(entries, entries.back().Name(), what);
      image::SelectPlatform(entries, "linux/amd64", what);
    } else {
      image::Manifest m = image::ParseManifest(doc, what);
      for (const image::Descriptor& layer : m.layers) image::IsLayerMediaType(layer.media_type);
    }
  } catch (const util::Fatal&) {
  }
  return 0;
}

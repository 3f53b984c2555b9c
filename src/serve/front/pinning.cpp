#include "serve/front/pinning.h"

#include <nlohmann/json.hpp>

#include "image/registry_reference.h"

namespace imgcheck::serve::front {

Pinning PinImages(const std::vector<ImageResult>& images, rules::FailOn fail_on) {
  Pinning p;
  for (const ImageResult& r : images) {
    auto ref = image::ParseReference(r.use.image);
    if (r.use.pointer.empty() || r.use.unchanged || (ref && !ref->digest.empty())) continue;
    const fleet::Outcome& o = r.outcome;
    if (o.state == fleet::Outcome::State::kReady && o.verdict->Fails(fail_on)) continue;
    if (!ref || r.digest.empty()) {
      std::string why = !ref ? ref.error().message : o.error;
      p.unpinned.push_back(r.use.where + " " + r.use.image + ": " + why);
      continue;
    }
    p.pins.push_back({r.use.pointer, r.use.image + "@" + r.digest});
  }
  return p;
}

std::string JsonPatch(const std::vector<Pin>& pins) {
  if (pins.empty()) return "";
  nlohmann::json patch = nlohmann::json::array();
  for (const Pin& pin : pins)
    patch.push_back({{"op", "replace"}, {"path", pin.pointer}, {"value", pin.image}});
  return patch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace imgcheck::serve::front

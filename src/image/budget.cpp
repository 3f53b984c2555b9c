#include "image/budget.h"

#include <string>

#include "image/layer.h"

namespace imgcheck::image {

void ImageBudget::ChargeEntry(uint64_t name_bytes) {
  if (files_.fetch_add(1, std::memory_order_relaxed) + 1 > limits_.files)
    util::LimitExceeded("the image's tar entries (all layers)", std::to_string(limits_.files),
                        "--max-files");
  if (name_bytes_.fetch_add(name_bytes, std::memory_order_relaxed) + name_bytes >
      limits_.name_bytes)
    util::LimitExceeded("the image's paths and link targets (all layers)",
                        util::MiBText(limits_.name_bytes), "--max-names-mb");
}

void ImageBudget::ChargeCaptured(uint64_t bytes) {
  if (captured_.fetch_add(bytes, std::memory_order_relaxed) + bytes > limits_.captured_bytes)
    util::LimitExceeded("the file contents kept of the image (all layers)",
                        util::MiBText(limits_.captured_bytes), "--max-captured-mb");
}

void ImageBudget::Charge(const LayerContents& contents) {
  for (const LayerEntry& e : contents.entries) {
    ChargeEntry(e.path.size() + e.link_target.size());
    if (e.content) ChargeCaptured(e.content->captured_bytes());
  }
}

void ImageBudget::Refund(const LayerContents& contents) {
  for (const LayerEntry& e : contents.entries) {
    files_.fetch_sub(1, std::memory_order_relaxed);
    name_bytes_.fetch_sub(e.path.size() + e.link_target.size(), std::memory_order_relaxed);
    if (e.content) captured_.fetch_sub(e.content->captured_bytes(), std::memory_order_relaxed);
  }
}

}  // namespace imgcheck::image

// What the layers of one image may make imgcheck hold, all layers together (util::Limits): tar
// entries, bytes of names and link targets, captured file bytes. Charged as entries stream
// past, from every thread that reads a layer, so that a hostile layer stops at the bound instead
// of after it has filled memory.
#pragma once

#include <atomic>
#include <cstdint>

#include "util/limits.h"

namespace imgcheck::image {

struct LayerContents;

class ImageBudget {
 public:
  explicit ImageBudget(const util::Limits& limits) : limits_(limits) {}
  ImageBudget(const ImageBudget&) = delete;
  ImageBudget& operator=(const ImageBudget&) = delete;

  const util::Limits& limits() const { return limits_; }
  /// One entry whose path and link target take `name_bytes`. Thread-safe; throws util::Fatal
  /// (util::LimitExceeded) past --max-files or --max-names-mb.
  void ChargeEntry(uint64_t name_bytes);
  /// File contents kept in memory. Thread-safe; throws past --max-captured-mb.
  void ChargeCaptured(uint64_t bytes);
  /// A whole layer read elsewhere (the layer cache): its entries and captured bytes.
  void Charge(const LayerContents& contents);
  /// Gives back what a reading that is dropped (and read again) was charged. Thread-safe.
  void Refund(const LayerContents& contents);

 private:
  util::Limits limits_;
  std::atomic<uint64_t> files_{0}, name_bytes_{0}, captured_{0};
};

}  // namespace imgcheck::image

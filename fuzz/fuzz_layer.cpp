// A layer blob (tar, gzip or zstd, detected as in an image) read by image::ReadLayer with a
// capture policy, then merged twice onto one tree (as layers 0 and 1, so the second copy's
// whiteouts, opaque directories and hard links meet what the first wrote).
#include "fuzz_input.h"
#include "image/budget.h"
#include "image/layer.h"
#include "image/merge.h"
#include "image/stream.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::MemoryBlob blob(fuzz::Bytes(data, size));
  image::HashingReader stored(blob, /*hash=*/false);
  image::CapturePolicy capture = [](std::string_view, uint64_t, uint32_t) {
    return image::CapturePrefix(4096);
  };
  image::LayerContents contents;
  image::ImageBudget budget{util::Limits{}};  // the command line's defaults
  try {
    contents = image::ReadLayer(stored, 0, capture, budget);
  } catch (const util::Fatal&) {
    return 0;  // a corrupt stream or tar: the error the user sees
  }
  image::Tree tree;
  std::vector<util::Diagnostic> diagnostics;
  for (int layer = 0; layer < 2; ++layer) {
    try {
      image::Merge(tree, contents, layer, diagnostics);
    } catch (const util::Fatal&) {
      return 0;
    }
  }
  for (const auto& [path, node] : tree.nodes()) {
    if (node.type == image::NodeType::kSymlink) tree.Resolve(path);
  }
  return 0;
}

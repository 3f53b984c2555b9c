// A layer's stored bytes through image::Decompressor (gzip via ISA-L, zstd, or none by the magic
// bytes), handed over in small chunks so that headers and frames straddle chunk boundaries.
#include <algorithm>
#include <memory>

#include "fuzz_input.h"
#include "image/stream.h"

using namespace imgcheck;

namespace {

/// `bytes` in chunks of `step` bytes (the last may be shorter), views into the input.
class MemoryChunks : public image::ChunkReader {
 public:
  MemoryChunks(std::string_view bytes, size_t step) : rest_(bytes), step_(step) {}
  std::string_view Next() override {
    std::string_view chunk = rest_.substr(0, std::min(step_, rest_.size()));
    rest_.remove_prefix(chunk.size());
    return chunk;
  }

 private:
  std::string_view rest_;
  size_t step_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  MemoryChunks chunks(fuzz::Bytes(data + 1, size - 1), 1 + data[0]);  // 1..256-byte chunks
  try {
    image::Decompressor plain(chunks);
    auto buf = std::make_unique<char[]>(1 << 16);
    // Bombs are the zstd window limit's and the tar limits' business, not this target's: stop
    // after 64 MiB of output so that the fuzzer keeps its pace.
    uint64_t total = 0;
    while (total < (64u << 20)) {
      size_t n = plain.Read(buf.get(), 1 << 16);
      if (n == 0) break;
      total += n;
    }
  } catch (const util::Fatal&) {
  }
  return 0;
}

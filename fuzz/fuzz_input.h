// Shared by the fuzz targets: the fuzzer's bytes as the inputs the parsers take.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "image/source.h"
#include "util/error.h"

namespace imgcheck::fuzz {

/// The bytes libFuzzer hands a target.
inline std::string_view Bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Targets that take several files read them from one input, separated by NUL bytes (none of
/// the text formats they parse holds one); fuzz_seeds joins its files the same way.
inline constexpr char kFileSeparator = '\0';

/// The NUL-separated parts of `input`, at most `max` (the last one keeps the rest).
inline std::vector<std::string_view> SplitFiles(std::string_view input, size_t max) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max) {
    size_t end = input.find(kFileSeparator);
    if (end == std::string_view::npos) break;
    parts.push_back(input.substr(0, end));
    input.remove_prefix(end + 1);
  }
  parts.push_back(input);
  return parts;
}

/// A blob whose stored bytes are `bytes`.
class MemoryBlob : public image::BlobReader {
 public:
  explicit MemoryBlob(std::string_view bytes) : rest_(bytes) {}
  size_t Read(char* buf, size_t n) override {
    n = std::min(n, rest_.size());
    std::memcpy(buf, rest_.data(), n);
    rest_.remove_prefix(n);
    return n;
  }

 private:
  std::string_view rest_;
};

}  // namespace imgcheck::fuzz

#include "util/capturer.h"

#include <algorithm>
#include <string>

namespace imgcheck::util {

bool Capturer::Skip(uint64_t n) {
  static const std::string kZeros(1 << 16, '\0');
  while (n > 0) {
    size_t k = static_cast<size_t>(std::min<uint64_t>(n, kZeros.size()));
    if (!Feed(std::string_view(kZeros).substr(0, k))) return false;
    n -= k;
  }
  return true;
}

}  // namespace imgcheck::util

#include "util/clock.h"

#include <ctime>

namespace imgcheck::util {

std::string UtcNow(const char* format) {
  char out[64];
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  size_t n = std::strftime(out, sizeof out, format, &utc);
  return std::string(out, n);
}

}  // namespace imgcheck::util

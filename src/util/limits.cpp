#include "util/limits.h"

#include <string>

#include "util/error.h"

namespace imgcheck::util {

void LimitExceeded(std::string_view what, std::string_view limit, std::string_view flag) {
  throw Fatal(std::string(what) + " exceeds imgcheck's limit of " + std::string(limit) +
              " (raise it with " + std::string(flag) + ")");
}

std::string MiBText(uint64_t bytes) {
  if (bytes % (1u << 20) != 0)
    return std::to_string(bytes) + " bytes";  // set by a caller, not a flag
  return std::to_string(bytes >> 20) + " MiB";
}

}  // namespace imgcheck::util

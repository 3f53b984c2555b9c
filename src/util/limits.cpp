#include "util/limits.h"

#include <string>

#include "util/error.h"

namespace imgcheck::util {

void LimitExceeded(std::string_view what, std::string_view limit, std::string_view flag) {
  throw Fatal(std::string(what) + " exceeds imgcheck's limit of " + std::string(limit) +
              " (raise it with " + std::string(flag) + ")");
}

}  // namespace imgcheck::util

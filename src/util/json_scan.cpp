#include "util/json_scan.h"

#include <algorithm>

namespace imgcheck::util {

JsonShape ScanJson(std::string_view text) {
  JsonShape shape;
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      shape.depth = std::max(shape.depth, ++depth);
      ++shape.values;
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    } else if (c == ',') {
      ++shape.values;
    }
  }
  return shape;
}

}  // namespace imgcheck::util

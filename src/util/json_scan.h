// What a JSON document will cost to parse, read off its bytes in one pass before any parser
// allocates: nesting ("[[[[..." is a heap object per bracket) and the number of values.
#pragma once

#include <cstddef>
#include <string_view>

namespace imgcheck::util {

struct JsonShape {
  size_t depth = 0;   ///< deepest [ / { nesting outside strings
  size_t values = 0;  ///< arrays, objects and commas outside strings: at least the values - 1
};

JsonShape ScanJson(std::string_view text);

}  // namespace imgcheck::util

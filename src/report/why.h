// The text of `imgcheck why`: the loader's resolutions of one soname or path (loader/why.h),
// explained the way libtree does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "image/tree.h"
#include "loader/why.h"

namespace imgcheck::report {

/// The text `imgcheck why` prints for `entries`: per consumer, the hit (reason, search entry,
/// whose RPATH, real file and layer) or "not found" with every candidate tried and why it was
/// passed over.
std::string RenderWhy(const image::Tree& tree, std::string_view target,
                      const std::vector<loader::WhyEntry>& entries);

}  // namespace imgcheck::report

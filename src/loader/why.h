// `imgcheck why`: every resolution of one soname or path across link maps, with what libtree
// shows (where it was found and by which rule, or every place tried); report/why.h renders it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "image/tree.h"
#include "loader/loader.h"

namespace imgcheck::loader {

/// A root consumer and its link map.
struct Root {
  std::string path;
  std::string role;  ///< "framework torch", "executable", ...; may be empty
  const LoadGraph* graph = nullptr;

  /// "PATH (ROLE)", or PATH when the role is empty: how reports name the root.
  std::string Label() const { return role.empty() ? path : path + " (" + role + ")"; }
};

/// One distinct resolution of the target, with the roots whose link map holds it.
struct WhyEntry {
  Resolution resolution;
  std::vector<Root> roots;  ///< each path and role once
};

/// The resolutions of `target` in `roots`: a name without '/' matches the requested name; a
/// path matches the path as opened or, after following links in `tree`, the real path.
/// Identical resolutions (same consumer, name, kind and outcome) are listed once.
std::vector<WhyEntry> FindWhy(const image::Tree& tree, const std::vector<Root>& roots,
                              std::string_view target);

}  // namespace imgcheck::loader

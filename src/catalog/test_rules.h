// Test-only: the built-in rules/ classification, loaded once per test executable.
#pragma once

#include "catalog/library_rules.h"

namespace imgcheck::catalog {

inline const LibraryRules& BuiltInRules() {
  static const LibraryRules rules =
      LibraryRules::FromFiles(util::LoadDataFiles({IMGCHECK_RULES_DIR}));
  return rules;
}

}  // namespace imgcheck::catalog

// Shared by the catalog's fuzz targets: the input's files placed in an image, catalogued with the
// built-in rules, as a scan catalogues an image.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "catalog/test_rules.h"
#include "fake_image.h"
#include "fuzz_input.h"

namespace imgcheck::fuzz {

/// Catalogues an image holding the NUL-separated parts of `input` at `paths`, in order (parts
/// beyond them are left out). A util::Fatal (a resource limit reached) is a correct answer.
inline void CatalogFiles(std::string_view input, const std::vector<std::string>& paths) {
  std::vector<std::string_view> files = SplitFiles(input, paths.size());
  testing::FakeImage image;
  for (size_t i = 0; i < files.size(); ++i) image.File(paths[i], std::string(files[i]));
  try {
    catalog::Build(image.image(), catalog::BuiltInRules());
  } catch (const util::Fatal&) {
  }
}

}  // namespace imgcheck::fuzz

// Test-only helpers shared by the elf tests.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>

#include "elf/elf.h"
#include "support.h"
#include "util/path.h"

namespace imgcheck::elf {

/// Parse of the whole file at `path`; the test fails unless it is a valid ELF file.
inline ElfInfo ParseFile(const std::filesystem::path& path) {
  auto r = Parse(util::SparseFile::Whole(imgcheck::testing::ReadFile(path)));
  if (!r) FAIL(path.string() << ": " << r.error().message);
  REQUIRE(r->has_value());
  return **r;
}

}  // namespace imgcheck::elf

// Host files imgcheck reads itself (rules, configuration, credentials), never image content:
// that is read through image::Tree and its captured bytes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <limits>
#include <string>

#include "util/error.h"

namespace imgcheck::util {

/// The whole of the regular file `path`. Errors: "cannot read PATH: REASON" when it cannot be
/// opened or read (or is a directory), "PATH is larger than N bytes" past `max_bytes`.
Expected<std::string> ReadFile(const std::filesystem::path& path,
                               size_t max_bytes = std::numeric_limits<size_t>::max());

}  // namespace imgcheck::util

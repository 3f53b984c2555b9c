// Parse with a record of the byte ranges it read: the capturer keeps exactly those, so what
// Parse needs is written down once, in Parse. Internal to the elf stage.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "elf/elf.h"

namespace imgcheck::elf {

/// [offset, offset + length) ranges of a file.
using RangeList = std::vector<std::pair<uint64_t, uint64_t>>;

/// Parse(file, options), appending every range it read to `touched` (may be null).
util::Expected<std::optional<ElfInfo>> ParseRecording(const util::SparseFile& file,
                                                      RangeList* touched,
                                                      const ParseOptions& options = {});

}  // namespace imgcheck::elf

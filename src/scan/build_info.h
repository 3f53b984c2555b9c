// What this binary is: its version and commit, generated at build time (build_info.cmake) into
// one small file, so that a new commit recompiles that file alone.
#pragma once

#include <string_view>

namespace imgcheck::scan {

/// "0.3.0" on a v0.3.0 tag, "0.3.0-5-gabc1234[-dirty]" after it, the CMake project version
/// without git; scripts/release.sh sets it (IMGCHECK_VERSION_OVERRIDE).
std::string_view BuildVersion();
/// The full git commit hash, or "unknown" when built outside git.
std::string_view BuildCommit();

}  // namespace imgcheck::scan

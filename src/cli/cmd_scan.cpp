#include "cli/commands.h"
#include "util/error.h"

namespace imgcheck::cli {

// Placeholder until the scan stage lands.
Runner DefineScan(CLI::App& sub) {
  sub.allow_extras();
  return [] () -> int { throw util::Fatal("'scan' is not implemented yet"); };
}

}  // namespace imgcheck::cli

#include "cli/commands.h"
#include "util/error.h"

namespace imgcheck::cli {

// Placeholder until the probe stage lands.
Runner DefineProbe(CLI::App& sub) {
  sub.allow_extras();
  return [] () -> int { throw util::Fatal("'probe' is not implemented yet"); };
}

}  // namespace imgcheck::cli

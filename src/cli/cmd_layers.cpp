#include "cli/commands.h"
#include "util/error.h"

namespace imgcheck::cli {

// Placeholder until the layers stage lands.
Runner DefineLayers(CLI::App& sub) {
  sub.allow_extras();
  return [] () -> int { throw util::Fatal("'layers' is not implemented yet"); };
}

}  // namespace imgcheck::cli

#include "cli/commands.h"
#include "util/error.h"

namespace imgcheck::cli {

// Placeholder until the catalog stage lands.
Runner DefineCatalog(CLI::App& sub) {
  sub.allow_extras();
  return [] () -> int { throw util::Fatal("'catalog' is not implemented yet"); };
}

}  // namespace imgcheck::cli

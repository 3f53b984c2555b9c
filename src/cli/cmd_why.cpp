#include "cli/commands.h"
#include "util/error.h"

namespace imgcheck::cli {

// Placeholder until the why stage lands.
Runner DefineWhy(CLI::App& sub) {
  sub.allow_extras();
  return [] () -> int { throw util::Fatal("'why' is not implemented yet"); };
}

}  // namespace imgcheck::cli

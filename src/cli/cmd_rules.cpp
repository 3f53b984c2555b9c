#include "cli/commands.h"
#include "util/error.h"

namespace imgcheck::cli {

// Placeholder until the rules stage lands.
Runner DefineRules(CLI::App& sub) {
  sub.allow_extras();
  return [] () -> int { throw util::Fatal("'rules' is not implemented yet"); };
}

}  // namespace imgcheck::cli

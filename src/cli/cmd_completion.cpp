// `imgcheck completion bash|zsh|fish` and `imgcheck man`: generated from the command tree the
// parser itself uses (the parent of these subcommands), never written by hand.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/completion.h"
#include "scan/build_info.h"
#include "util/error.h"

namespace imgcheck::cli {

Runner DefineCompletion(CLI::App& sub) {
  auto shell = std::make_shared<std::string>();
  std::string names;
  for (std::string_view s : CompletionShells())
    names += (names.empty() ? "" : "|") + std::string(s);
  sub.add_option("shell", *shell, names)->required();
  CLI::App* app = sub.get_parent();
  return [app, shell, names]() -> int {
    std::optional<std::string> script = CompletionScript(*app, *shell);
    if (!script) throw util::Fatal("completion: unknown shell '" + *shell + "' (" + names + ")");
    std::cout << *script;
    return 0;
  };
}

Runner DefineMan(CLI::App& sub) {
  CLI::App* app = sub.get_parent();
  return [app]() -> int {
    std::cout << ManPage(*app, scan::BuildVersion());
    return 0;
  };
}

}  // namespace imgcheck::cli

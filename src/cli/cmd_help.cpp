// `imgcheck help [COMMAND]` and `imgcheck version`: words a user types, so that they are never
// taken for image names.
#include <iostream>

#include "cli/commands.h"
#include "scan/policy.h"
#include "util/error.h"
#include "util/text.h"

namespace imgcheck::cli {

Runner DefineHelp(CLI::App& sub) {
  auto topic = std::make_shared<std::string>();
  sub.add_option("command", *topic, "the subcommand to explain");
  CLI::App* app = sub.get_parent();
  return [app, topic]() -> int {
    // Through the formatter: App::help() would describe the subcommand parsed, `help` itself.
    auto help = [](const CLI::App* a) {
      std::cout << a->get_formatter()->make_help(a, a->get_name(), CLI::AppFormatMode::Normal);
      return 0;
    };
    if (topic->empty()) return help(app);
    for (const CLI::App* s : app->get_subcommands([](const CLI::App*) { return true; }))
      if (s->get_name() == *topic) return help(s);
    std::string hint = SuggestCommand(*topic);
    throw util::Fatal("help: unknown command '" + *topic + "'" +
                      (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  };
}

Runner DefineVersion(CLI::App&) {
  return []() -> int {
    std::cout << "imgcheck " IMGCHECK_VERSION "\n";
    // The data too: a binary judges by whatever rules/ (or update) it finds.
    try {
      std::cout << "rules " << scan::LoadKnowledge({}).version().str() << "\n";
    } catch (const util::Fatal& e) {
      std::cout << "rules: unreadable (" << e.what() << ")\n";
    }
    return 0;
  };
}

}  // namespace imgcheck::cli

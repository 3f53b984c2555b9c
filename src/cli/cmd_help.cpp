// `imgcheck help [COMMAND]` and `imgcheck version`: words a user types, so that they are never
// taken for image names.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "scan/build_info.h"
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

// The rule data's identity is the digest of the directory every scan reads (RulesDir): the data
// is read at run time, so the binary's commit alone does not say which facts it judged by. Its
// version (the newest fact's date and a content hash) is shown when the data loads.
Runner DefineVersion(CLI::App& sub) {
  auto format = std::make_shared<std::string>("text");
  sub.add_option("--format", *format, "text or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  return [format]() -> int {
    std::string dir = scan::RulesDir();
    std::string digest = scan::TreeDigest(dir);
    std::string data_version, data_error;
    try {
      data_version = scan::LoadKnowledge({}).version().str();
    } catch (const util::Fatal& e) {
      data_error = e.what();
    }
    if (*format == "json") {
      nlohmann::ordered_json j;
      j["name"] = "imgcheck";
      j["version"] = scan::BuildVersion();
      j["commit"] = scan::BuildCommit();
      j["rules"] = {{"dir", dir}, {"digest", digest}};
      if (data_error.empty())
        j["rules"]["version"] = data_version;
      else
        j["rules"]["error"] = data_error;
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    std::cout << "imgcheck " << scan::BuildVersion() << "\ncommit: " << scan::BuildCommit()
              << "\nrules: " << digest << " (" << dir << ")\nrules data: "
              << (data_error.empty() ? data_version : "unreadable (" + data_error + ")") << "\n";
    return 0;
  };
}

}  // namespace imgcheck::cli

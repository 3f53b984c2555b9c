// One namespace, two kinds of variable: each flag's own (FlagVariable, shown by --help and the man
// page beside the flag) and the others the code reads (util::kEnvironment). This reads every
// getenv of src/ and the whole command tree, so that a new flag or a new getenv that makes one
// name mean two things fails here, whichever branch adds it.
#include "util/environment.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "cli/commands.h"
#include "cli/completion.h"
#include "support.h"

namespace imgcheck::cli {
namespace {

namespace fs = std::filesystem;

// Each variable a flag reads, with the command and flag it sets.
std::map<std::string, std::string> FlagVariables(const CLI::App& app) {
  std::map<std::string, std::string> out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    for (const CLI::Option* o : sub->get_options())
      if (!o->get_envname().empty()) out[o->get_envname()] = sub->get_name() + " " + o->get_name();
  return out;
}

// Each name a getenv or secure_getenv call of src/ reads, with the file that reads it.
std::map<std::string, std::string> VariablesRead() {
  const std::regex call(R"((?:secure_)?getenv\s*\(\s*"([^"]*)\"\s*\))");
  // A getenv of anything but a literal would hide its name from this test; MoveRenamedVariables
  // reads util::kRenamedVariables' old names, checked below.
  const std::regex hidden(R"(getenv\s*\((?!\s*"|\s*old_name\.c_str\(\)))");
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(testing::SourceDir() / "src")) {
    const std::string file = e.path().filename().string();
    if (!e.is_regular_file() || file.ends_with("_test.cpp") ||
        !(file.ends_with(".cpp") || file.ends_with(".h")))
      continue;
    const std::string text = testing::ReadFile(e.path());
    const std::string where = e.path().lexically_relative(testing::SourceDir()).string();
    INFO(where);
    CHECK_FALSE(std::regex_search(text, hidden));
    for (std::sregex_iterator m(text.begin(), text.end(), call), end; m != end; ++m)
      out[(*m)[1]] = where;
  }
  return out;
}

TEST_CASE("every variable the code reads is documented and none is also a flag's", "[cli]") {
  CLI::App app;
  Runner run;
  DefineApp(app, run);
  std::map<std::string, std::string> flags = FlagVariables(app);
  std::map<std::string, std::string> read = VariablesRead();
  REQUIRE(read.size() >= 8);  // the scan of src/ found the known reads
  CHECK(read.count("IMGCHECK_PROBE_HELPER"));
  CHECK(flags.count("IMGCHECK_PROBE"));  // scan --probe's
  std::set<std::string> documented;
  for (const util::EnvironmentVariable& v : util::kEnvironment)
    documented.insert(std::string(v.name));
  const std::string usage = testing::ReadFile(testing::SourceDir() / "docs/usage.md");
  const std::string man = ManPage(app, "0.0.0");
  for (const auto& [name, file] : read) {
    INFO(name << " read by " << file);
    CHECK(documented.count(name));
    CHECK_FALSE(flags.count(name));
  }
  for (const std::string& name : documented) {
    INFO(name);
    CHECK_FALSE(flags.count(name));
    CHECK(read.count(name));  // no stale row
    CHECK(usage.find("`" + name + "`") != std::string::npos);
    CHECK(man.find("\\fB" + name + "\\fR") != std::string::npos);
  }
  // A renamed variable's old name may be a flag's only where a path cannot be the flag's value.
  for (const util::RenamedVariable& v : util::kRenamedVariables) {
    INFO(v.old_name);
    CHECK(documented.count(std::string(v.name)));
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      for (const CLI::Option* o : sub->get_options())
        if (o->get_envname() == v.old_name) CHECK(o->get_expected_max() == 0);  // a flag
  }
}

TEST_CASE("each flag's variable follows the one rule and is in --help and the man page", "[cli]") {
  CLI::App app;
  Runner run;
  DefineApp(app, run);
  const std::string man = ManPage(app, "0.0.0");
  size_t variables = 0;
  for (const CLI::App* sub : VisibleCommands(app)) {
    std::string help =
        sub->get_formatter()->make_help(sub, sub->get_name(), CLI::AppFormatMode::Normal);
    for (const CLI::Option* o : VisibleOptions(*sub)) {
      INFO(sub->get_name() << " " << o->get_name());
      if (o->get_name() == "--help") continue;
      if (!FlagsFromEnvironment(sub->get_name())) {
        CHECK(o->get_envname().empty());
        continue;
      }
      CHECK(o->get_envname() == FlagVariable(*o));
      CHECK(help.find("Env:" + o->get_envname()) != std::string::npos);
      CHECK(man.find("(variable \\fB" + o->get_envname() + "\\fR)") != std::string::npos);
      ++variables;
    }
  }
  CHECK(variables > 40);  // scan's and serve's flags
  CHECK(FlagVariable(*app.get_subcommand("scan")->get_option("--fail-on")) == "IMGCHECK_FAIL_ON");
}

}  // namespace
}  // namespace imgcheck::cli

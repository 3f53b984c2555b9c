// The completions and the man page cover every subcommand and flag the parser has: they are
// generated from DefineApp, and this walks the same tree to check each one is named.
#include "cli/completion.h"

#include <catch2/catch.hpp>

#include "cli/commands.h"

namespace imgcheck::cli {
namespace {

// "--max-files" as roff writes it.
std::string RoffFlag(const std::string& flag) {
  std::string out;
  for (char c : flag) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

}  // namespace

TEST_CASE("completions and the man page name every subcommand and flag", "[cli]") {
  CLI::App app;
  Runner run;
  DefineApp(app, run);
  std::string bash = *CompletionScript(app, "bash");
  std::string zsh = *CompletionScript(app, "zsh");
  std::string fish = *CompletionScript(app, "fish");
  std::string man = ManPage(app, "0.0.0");
  CHECK_FALSE(CompletionScript(app, "tcsh"));
  size_t commands = 0, flags = 0;
  for (const auto& c : Commands()) {
    std::string name(c.name);
    INFO(name);
    ++commands;
    CHECK(bash.find("    " + name + ")\n") != std::string::npos);
    CHECK(zsh.find("'" + name + ":") != std::string::npos);
    CHECK(fish.find(" -a " + name + " ") != std::string::npos);
    CHECK(man.find(".SS \"imgcheck " + RoffFlag(name) + "\"") != std::string::npos);
    const CLI::App* sub = app.get_subcommand(name);
    for (const CLI::Option* o : VisibleOptions(*sub)) {
      for (const auto& l : o->get_lnames()) {
        INFO("--" + l);
        ++flags;
        CHECK(bash.find(" --" + l) != std::string::npos);
        CHECK(zsh.find("'--" + l + "[") != std::string::npos);
        CHECK(fish.find(" -l " + l) != std::string::npos);
        CHECK(man.find("\\fB" + RoffFlag("--" + l) + "\\fR") != std::string::npos);
      }
      for (const auto& s : o->get_snames()) {
        INFO("-" + s);
        CHECK(fish.find(" -s " + s) != std::string::npos);
        CHECK(man.find("\\fB\\-" + s + "\\fR") != std::string::npos);
      }
    }
  }
  CHECK(commands == VisibleCommands(app).size());
  CHECK(flags > 40);  // scan alone has more: the walk reached the options
  CHECK(man.find(".SH EXIT STATUS") != std::string::npos);
}

TEST_CASE("hidden options stay out of the completions", "[cli]") {
  CLI::App app;
  Runner run;
  DefineApp(app, run);
  CHECK(CompletionScript(app, "bash")->find("--test-libcuda") == std::string::npos);
  CHECK(ManPage(app, "0.0.0").find("test\\-libcuda") == std::string::npos);
}

TEST_CASE("each command's --format completes to that command's own formats", "[cli]") {
  CLI::App app;
  Runner run;
  DefineApp(app, run);
  std::string bash = *CompletionScript(app, "bash");
  // The bash script has one case per command; each --format line follows its command's case.
  auto formats_of = [&](const std::string& command) {
    size_t at = bash.find("    " + command + ")\n");
    REQUIRE(at != std::string::npos);
    size_t line = bash.find("-f|--format) COMPREPLY=($(compgen -W '", at);
    REQUIRE(line != std::string::npos);
    line = bash.find('\'', line) + 1;
    return bash.substr(line, bash.find('\'', line) - line);
  };
  CHECK(formats_of("scan") == "text json sarif junit codequality markdown");
  CHECK(formats_of("diff") == "text json markdown");
  CHECK(formats_of("catalog") == "table json cyclonedx cyclonedx-1.5 spdx-json");
  CHECK(formats_of("layers") == "text json");
  CHECK(formats_of("probe") == "text json");
}
}  // namespace imgcheck::cli

// Shell completions and the man page, generated from the same CLI11 tree as --help (DefineApp),
// so that neither can name a flag the parser lacks or miss one it has.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace imgcheck::cli {

/// The shells `imgcheck completion` writes for.
const std::vector<std::string_view>& CompletionShells();
/// The completion script for `shell` (bash, zsh, fish); nullopt for another shell.
std::optional<std::string> CompletionScript(const CLI::App& app, std::string_view shell);
/// imgcheck(1) in roff (man(7) macros): synopsis, every subcommand and its options, exit codes.
std::string ManPage(const CLI::App& app, std::string_view version);

/// The visible subcommands of `app` and the visible options of one, as the generators walk them
/// (options in a group named "" are hidden from --help, and from these too).
std::vector<const CLI::App*> VisibleCommands(const CLI::App& app);
std::vector<const CLI::Option*> VisibleOptions(const CLI::App& sub);

}  // namespace imgcheck::cli

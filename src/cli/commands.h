// The subcommand table: the one place that names what a user can run. It also feeds --help
// and the "did you mean" suggestion.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attest/keys.h"
#include "image/image.h"
#include "rules/update.h"
#include "scan/scan.h"
#include "util/error.h"
#include "util/formats.h"

namespace imgcheck::cli {

/// Runs a parsed subcommand; returns the process exit code.
using Runner = std::function<int()>;

struct Command {
  std::string_view name;
  std::string_view summary;
  /// Declares the subcommand's options on `sub` and returns what runs it once parsed.
  std::function<Runner(CLI::App& sub)> define;
};

const std::vector<Command>& Commands();

/// Whether every flag of the subcommand `command` also reads its variable (FlagVariable) when not
/// given: flag > variable > config file. scan and serve: what CI systems and Deployments set.
bool FlagsFromEnvironment(std::string_view command);
/// The variable of a flag: IMGCHECK_ and its first long name in capitals, '-' as '_' (--fail-on:
/// IMGCHECK_FAIL_ON). The one rule: --help and the man page show what it gives, per flag.
std::string FlagVariable(const CLI::Option& flag);
/// Old names of renamed variables (util::kRenamedVariables) whose value is an absolute path are
/// moved to the new name before the command line is read, so that the flag whose variable the
/// old name now is never sees a path. Call before parsing, while only one thread runs.
void MoveRenamedVariables();

/// Options every subcommand that reads an image shares.
struct ImageArgs {
  std::string reference;
  std::string platform = "linux/amd64";
  /// --creds HOST=USER:PASS (repeatable; a bare USER:PASS is for the image's own registry)
  std::vector<std::string> creds;
  std::string authfile;  ///< --authfile: the auth file to read instead of the default ones
  /// --allow-blob-host: where blob requests may be redirected (serve: besides nothing else)
  std::vector<std::string> allow_blob_hosts;
  /// serve's --allow-registry: the only hosts manifest and token requests may be redirected to
  std::vector<std::string> allow_registries;
  bool tls_verify = true;  ///< --tls-verify=false skips registry certificate checks
  std::string cert_dir;    ///< --cert-dir: *.crt CAs, *.cert/*.key client pair
  std::string ca_cert;     ///< --ca-cert: a CA bundle to trust for the registry
  int jobs = 0;            ///< --jobs/-j: layers read at once; 0: one per core
  std::string cache_dir;   ///< --cache-dir; empty: $XDG_CACHE_HOME/imgcheck or ~/.cache/imgcheck
  bool no_cache = false;   ///< --no-cache: neither read nor write the layer cache
  uint64_t cache_max_mb = 1024;  ///< --cache-max-size, in MiB
  bool quiet = false;            ///< --quiet: no progress line
  bool profile = false;          ///< --profile: per-stage timings on stderr (util/profile.h)
  util::Limits limits;           ///< --max-*, --read-timeout, --deadline
};
void AddImageArgs(CLI::App& sub, ImageArgs& args);
/// Load options from the shared flags (scan::Run adds the catalog's capture policy).
image::LoadOptions ToLoadOptions(const ImageArgs& args);
/// The scan of the image `args` names, as far as `depth`, with `knowledge`'s rule data.
scan::Request ScanRequest(const ImageArgs& args, const rules::Knowledge& knowledge,
                          scan::Depth depth);
/// The registry and layer cache options of AddImageArgs, without the image and --platform
/// (`serve` takes images from requests).
void AddPullArgs(CLI::App& sub, ImageArgs& args);
/// The --max-*, --read-timeout and --deadline flags (part of AddPullArgs).
void AddLimitArgs(CLI::App& sub, util::Limits& limits);

/// Checks of numeric flags whose message says what is wanted ("must be a number above 0, not
/// '0'") where CLI11's own name the range of a double.
const CLI::Validator& Positive();
const CLI::Validator& NonNegative();

/// Option `flags` into `value`, one of the names of `table`, as AddFormatOption's.
template <class Table>
CLI::Option* AddTableOption(CLI::App& sub, const std::string& flags, std::string& value,
                            const Table& table, const std::string& help) {
  CLI::Validator known([&table](std::string& name) { return util::UnknownFormat(table, name); },
                       "");
  return sub.add_option(flags, value, help)
      ->type_name(util::FormatNames(table))
      ->check(known)
      ->capture_default_str();
}
/// -f/--format into `format`, from the command's one table of formats: the help lists each with
/// its summary, the value shown is "text|json|..." (what shell completion offers), and a name
/// the table lacks is refused as the command line is read.
template <class Table>
CLI::Option* AddFormatOption(CLI::App& sub, std::string& format, const Table& table) {
  return AddTableOption(sub, "-f,--format", format, table, util::FormatHelp(table));
}
/// The format a value AddFormatOption accepted names.
template <class Table>
auto FormatOf(const Table& table, const std::string& name) {
  auto format = util::ParseFormat(table, name);
  if (!format) throw util::Fatal("--format: " + util::UnknownFormat(table, name));
  return *format;
}

// One function per subcommand, each in its own cmd_*.cpp.
Runner DefineScan(CLI::App& sub);
Runner DefineDiff(CLI::App& sub);
Runner DefineLayers(CLI::App& sub);
Runner DefineCatalog(CLI::App& sub);
Runner DefineWhy(CLI::App& sub);
Runner DefineRules(CLI::App& sub);
Runner DefineProbe(CLI::App& sub);
Runner DefineHelp(CLI::App& sub);
Runner DefineVersion(CLI::App& sub);
Runner DefineCompletion(CLI::App& sub);
Runner DefineMan(CLI::App& sub);

/// The subcommand nearest to a mistyped word ("sacn" -> "scan"), "" when none is close.
std::string SuggestCommand(std::string_view word);
Runner DefineServe(CLI::App& sub);
Runner DefineKey(CLI::App& sub);
Runner DefineVerify(CLI::App& sub);

/// Adds --rules DIR (repeatable), --rules-cache DIR (scan::SetRulesCache) and --rules-key FILE
/// (repeatable: RulesKeys) to `sub`.
void AddRulesArg(CLI::App& sub, std::vector<std::string>& rules_dirs);

/// The keys published rules data must be signed with: the publisher's, shipped with the
/// bundled data (its *.pub), and each --rules-key (a mirror's own).
std::vector<attest::PublicKey> RulesKeys();
/// The check of installed rules data's signature record against RulesKeys(), which Main gives
/// scan::SetRulesSignatureCheck: what every command and serve's reload load goes through.
rules::SignatureCheck RulesSignatureCheck();

/// Prints "imgcheck: MESSAGE" on stderr as exactly one line (report::LogLine): how every
/// refused command line and failed run ends.
void PrintError(std::string_view message);

/// Said under --help (and in the man page): what each exit code means.
inline constexpr char kExitCodes[] =
    "Exit codes: 0 no finding at or above --fail-on (and, for bare `imgcheck`, the help on a "
    "terminal); 1 findings at or above --fail-on; 2 the command line was refused or the scan "
    "failed (and bare `imgcheck` in a script).";

/// The whole command tree on `app`, from Commands(): what --help, the shell completions and the
/// man page all describe. `run` receives the parsed subcommand's runner.
void DefineApp(CLI::App& app, Runner& run);

/// The whole command line; main() only calls this, and ExitFast with its status.
int Main(int argc, char** argv);

/// Ends the process with `status` once stdout and stderr are flushed, without destructors or
/// atexit handlers: the kernel drops a command's model at once, where freeing it object by
/// object cost a warm scan a tenth of its CPU. Sanitizer builds return `status` instead and
/// exit normally, so that the leak checker still sees everything freed.
int ExitFast(int status);

/// Keeps `object` until the process ends (see ExitFast) and returns it.
template <class T>
T& KeepToExit(std::unique_ptr<T> object) {
  static std::vector<std::unique_ptr<T>> kept;
  return *kept.emplace_back(std::move(object));
}

}  // namespace imgcheck::cli

// The subcommand table: the one place that names what a user can run. It also feeds --help
// and the "did you mean" suggestion.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"
#include "scan/scan.h"

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

/// Options every subcommand that reads an image shares.
struct ImageArgs {
  std::string reference;
  std::string platform = "linux/amd64";
  std::string creds;       ///< --creds USER:PASS for a registry
  bool tls_verify = true;  ///< --tls-verify=false skips registry certificate checks
  std::string cert_dir;    ///< --cert-dir: *.crt CAs, *.cert/*.key client pair
  std::string ca_cert;     ///< --ca-cert: a CA bundle to trust for the registry
  int jobs = 0;            ///< --jobs/-j: layers read at once; 0: one per core
  std::string cache_dir;   ///< --cache-dir; empty: $XDG_CACHE_HOME/imgcheck or ~/.cache/imgcheck
  bool no_cache = false;   ///< --no-cache: neither read nor write the layer cache
  uint64_t cache_max_mb = 1024;  ///< --cache-max-size, in MiB
  bool quiet = false;            ///< --quiet: no progress line
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

// One function per subcommand, each in its own cmd_*.cpp.
Runner DefineScan(CLI::App& sub);
Runner DefineLayers(CLI::App& sub);
Runner DefineCatalog(CLI::App& sub);
Runner DefineWhy(CLI::App& sub);
Runner DefineRules(CLI::App& sub);
Runner DefineProbe(CLI::App& sub);
Runner DefineHelp(CLI::App& sub);
Runner DefineVersion(CLI::App& sub);

/// The subcommand nearest to a mistyped word ("sacn" -> "scan"), "" when none is close.
std::string SuggestCommand(std::string_view word);
Runner DefineServe(CLI::App& sub);

/// Adds --rules DIR (repeatable) to `sub`.
void AddRulesArg(CLI::App& sub, std::vector<std::string>& rules_dirs);

/// Prints "imgcheck: MESSAGE" on stderr as exactly one line (report::LogLine): how every
/// refused command line and failed run ends.
void PrintError(std::string_view message);

/// The whole command line; main() only calls this.
int Main(int argc, char** argv);

}  // namespace imgcheck::cli

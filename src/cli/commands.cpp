#include "cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "attest/signature.h"
#include "report/escape.h"
#include "scan/build_info.h"
#include "util/environment.h"
#include "util/error.h"
#include "util/profile.h"
#include "util/text.h"

namespace imgcheck::cli {

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"scan", "check an image's CUDA/cuDNN stack and report findings (the default)", DefineScan},
      {"diff", "what a change did to the CUDA stack, and the findings it introduced or fixed",
       DefineDiff},
      {"layers", "list an image's layers with their sizes, history and file counts", DefineLayers},
      {"catalog", "list every CUDA library, driver file and framework, per layer", DefineCatalog},
      {"why", "explain how the loader resolves one soname or path in the image", DefineWhy},
      {"rules", "list the rules or explain one", DefineRules},
      {"probe", "run the image's own cuDNN stack on this host's GPU (runs image code)",
       DefineProbe},
      {"help", "print this help, or a subcommand's (help scan)", DefineHelp},
      {"version", "print imgcheck's version, commit and rule data version", DefineVersion},
      {"completion", "print a shell completion script: completion bash|zsh|fish", DefineCompletion},
      {"man", "print the man page imgcheck(1), in roff", DefineMan},
      {"serve", "answer Kubernetes admission, registry pushes and Gatekeeper over HTTPS",
       DefineServe},
      {"verify", "the verdict of a registry image from its signed attestations (no scan)",
       DefineVerify},
      {"key", "generate a key pair for signing attestations: key generate", DefineKey},
  };
  return kCommands;
}

bool FlagsFromEnvironment(std::string_view command) {
  return command == "scan" || command == "serve";
}

std::string FlagVariable(const CLI::Option& flag) {
  std::string name = "IMGCHECK_";
  for (char c : flag.get_lnames().at(0))
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

void MoveRenamedVariables() {
  for (const util::RenamedVariable& v : util::kRenamedVariables) {
    const std::string old_name(v.old_name);
    const char* value = std::getenv(old_name.c_str());
    if (value == nullptr || value[0] != '/') continue;
    const std::string name(v.name);
    setenv(name.c_str(), value, 0);  // the new name, when also set, wins
    unsetenv(old_name.c_str());
  }
}

namespace {

// Each visible flag of `sub` (not --help, not a hidden test-only one) reads FlagVariable's name.
void SetFlagVariables(CLI::App& sub) {
  for (CLI::Option* o : sub.get_options()) {
    if (!o->nonpositional() || o->get_lnames().empty() || o->get_lnames()[0] == "help" ||
        o->get_group().empty())
      continue;
    o->envname(FlagVariable(*o));
  }
}

}  // namespace

void AddImageArgs(CLI::App& sub, ImageArgs& args) {
  sub.add_option("image", args.reference,
                 "image: oci:PATH[:REF], oci-archive:PATH[:REF], docker-archive:PATH[:REF], "
                 "dir:PATH, or a registry reference")
      ->required();
  sub.add_option("--platform", args.platform, "os/arch[/variant] to pick from an index")
      ->capture_default_str();
  AddPullArgs(sub, args);
}

void AddPullArgs(CLI::App& sub, ImageArgs& args) {
  sub.add_option("--creds", args.creds,
                 "HOST=USER:PASS, offered to registry HOST only (repeatable); a bare USER:PASS "
                 "is for the registry of the image named (default: the auth files)")
      ->allow_extra_args(false);
  sub.add_option("--authfile", args.authfile,
                 "registry auth file (docker config.json or containers auth.json) to read "
                 "instead of the default ones")
      ->check(CLI::ExistingFile);
  sub.add_option("--allow-blob-host", args.allow_blob_hosts,
                 "HOST, HOST:PORT or *.DOMAIN a blob download may be redirected to (repeatable); "
                 "once given, redirects elsewhere are refused (README: Credentials and redirects)")
      ->allow_extra_args(false);
  sub.add_flag("--tls-verify", args.tls_verify,
               "check the registry's TLS certificate (--tls-verify=false to skip)");
  sub.add_option("--cert-dir", args.cert_dir,
                 "registry CA certificates (*.crt) and client cert/key (*.cert, *.key)");
  sub.add_option("--ca-cert", args.ca_cert, "a CA certificate bundle to trust for the registry");
  sub.add_option("-j,--jobs", args.jobs, "layers read at once (default: one per CPU core)")
      ->check(NonNegative());
  sub.add_option("--cache-dir", args.cache_dir,
                 "layer cache directory (default: $XDG_CACHE_HOME/imgcheck or ~/.cache/imgcheck)");
  sub.add_flag("--no-cache", args.no_cache, "neither use nor fill the layer cache");
  sub.add_option("--cache-max-size", args.cache_max_mb,
                 "bound of the layer cache in MiB; least recently used layers are pruned")
      ->capture_default_str();
  sub.add_flag("-q,--quiet", args.quiet, "no progress line on stderr");
  sub.add_flag("--profile", args.profile,
               "print on stderr where the time went, stage by stage (bench/README.md)");
  AddLimitArgs(sub, args.limits);
}

namespace {

// `text` as a finite number; nullopt when it is not all one.
std::optional<double> Number(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

const CLI::Validator& Positive() {
  static const CLI::Validator kCheck(
      [](std::string& text) -> std::string {
        auto v = Number(text);
        return v && *v > 0 ? "" : "must be a number above 0, not '" + text + "'";
      },
      "POSITIVE");
  return kCheck;
}

const CLI::Validator& NonNegative() {
  static const CLI::Validator kCheck(
      [](std::string& text) -> std::string {
        auto v = Number(text);
        return v && *v >= 0 ? "" : "must be a number, 0 or more, not '" + text + "'";
      },
      "NONNEGATIVE");
  return kCheck;
}

namespace {

// A size flag given in MiB, stored in bytes.
void AddMiB(CLI::App& sub, const std::string& flag, uint64_t& bytes, const std::string& what) {
  sub.add_option_function<uint64_t>(
         flag, [&bytes](uint64_t mib) { bytes = std::min<uint64_t>(mib, uint64_t{1} << 40) << 20; },
         what + " in MiB (default " + std::to_string(bytes >> 20) + ")")
      ->group("Limits");
}

}  // namespace

void AddLimitArgs(CLI::App& sub, util::Limits& limits) {
  const auto count = [&sub](const std::string& flag, auto& value, const std::string& what) {
    sub.add_option(flag, value, what)->capture_default_str()->check(Positive())->group("Limits");
  };
  count("--max-files", limits.files, "entries in all layers together");
  AddMiB(sub, "--max-names-mb", limits.name_bytes, "bytes of all paths and link targets,");
  AddMiB(sub, "--max-captured-mb", limits.captured_bytes, "file contents kept for the catalog,");
  AddMiB(sub, "--max-zstd-window-mb", limits.zstd_window, "largest zstd window decoded,");
  AddMiB(sub, "--max-spool-mb", limits.spool_bytes,
         "a compressed oci-archive or docker-archive decompressed to a temporary file,");
  AddMiB(sub, "--max-metadata-mb", limits.metadata_bytes, "largest package metadata file,");
  AddMiB(sub, "--max-elf-table-mb", limits.elf_table_bytes, "largest dynamic table of one ELF,");
  count("--max-include-depth", limits.include_depth, "ld.so.conf include nesting");
  count("--max-include-files", limits.include_files, "ld.so.conf files read (each once)");
  count("--max-loader-objects", limits.loader_objects, "objects in one simulated link map");
  count("--max-loader-work", limits.loader_work,
        "objects mapped and files tried in all link maps of one scan");
  count("--max-search-dirs", limits.search_dirs,
        "directories of one LD_LIBRARY_PATH, DT_RPATH or DT_RUNPATH list");
  count("--read-timeout", limits.read_timeout_s,
        "seconds of waiting in which a registry must send at least 1 KiB");
  count("--deadline", limits.deadline_s, "seconds for reading a whole image from a registry");
  sub.add_option("--min-rate", limits.min_rate,
                 "bytes a second a registry must average over each --read-timeout of waiting "
                 "(slower: abandoned); 0: only the 1 KiB of --read-timeout")
      ->capture_default_str()
      ->group("Limits");
}

image::LoadOptions ToLoadOptions(const ImageArgs& args) {
  image::LoadOptions o;
  o.platform = args.platform;
  o.registry.credentials = {args.creds, args.authfile};
  o.registry.allow_registries = args.allow_registries;
  o.registry.allow_blob_hosts = args.allow_blob_hosts;
  o.registry.tls_verify = args.tls_verify;
  o.registry.cert_dir = args.cert_dir;
  o.registry.ca_cert = args.ca_cert;
  o.jobs = args.jobs > 0 ? args.jobs
                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.use_cache = !args.no_cache;
  o.cache_dir = args.cache_dir;
  o.cache_max_bytes = std::min<uint64_t>(args.cache_max_mb, uint64_t{1} << 40) << 20;
  o.progress = !args.quiet;
  if (args.profile) util::EnableProfile();
  o.limits = args.limits;
  return o;
}

scan::Request ScanRequest(const ImageArgs& args, const rules::Knowledge& knowledge,
                          scan::Depth depth) {
  scan::Request request;
  request.reference = args.reference;
  request.load = ToLoadOptions(args);
  request.knowledge = &knowledge;
  request.depth = depth;
  return request;
}

namespace {
std::vector<std::string>& RulesKeyFiles() {
  static std::vector<std::string> files;
  return files;
}
}  // namespace

void AddRulesArg(CLI::App& sub, std::vector<std::string>& rules_dirs) {
  // One directory per --rules, so that the image reference after it stays the image.
  sub.add_option("--rules", rules_dirs, "directory of rule files that add to or override rules/")
      ->check(CLI::ExistingDirectory)
      ->allow_extra_args(false);
  sub.add_option_function<std::string>(
         "--rules-cache", [](const std::string& d) { scan::SetRulesCache(d); },
         "where `imgcheck rules update` installs rule data (default "
         "$XDG_DATA_HOME/imgcheck/rules)")
      ->allow_extra_args(false);
  sub.add_option_function<std::string>(
         "--rules-key", [](const std::string& f) { RulesKeyFiles().push_back(f); },
         "a public key (PEM) whose signature on rules data is trusted besides the publisher's "
         "(a mirror's own; repeatable)")
      ->check(CLI::ExistingFile)
      ->allow_extra_args(false);
}

std::vector<attest::PublicKey> RulesKeys() {
  std::vector<attest::PublicKey> keys = attest::KeysIn(scan::BundledRulesDir());
  for (const std::string& f : RulesKeyFiles()) keys.push_back(attest::LoadPublicKey(f));
  return keys;
}

rules::SignatureCheck RulesSignatureCheck() {
  return [](const std::string& record, const std::string& digest) {
    return attest::CheckSignatureRecord(record, digest, RulesKeys());
  };
}

namespace {

bool IsCommand(std::string_view word) {
  const auto& cmds = Commands();
  return std::any_of(cmds.begin(), cmds.end(), [&](const Command& c) { return c.name == word; });
}

std::string CommandList() {
  std::string out;
  for (const auto& c : Commands()) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

// A bare word ("list", "sacn") rather than an image: a registry reference names a repository
// with a tag, digest or registry ("ubuntu:22.04", "nvcr.io/x"), and a path exists on disk.
bool IsBareWord(const std::string& word) {
  std::error_code ec;
  return word.find_first_of(":/.@") == std::string::npos &&
         !std::filesystem::exists(std::filesystem::path(word), ec);
}

// The implicit `scan` of `imgcheck [FLAGS] IMAGE`, and bare words refused before anything
// reaches a registry. Returns an exit code when the command line is refused.
std::optional<int> Rewrite(std::vector<std::string>& args) {
  if (args.empty()) return std::nullopt;
  const std::string& first = args[0];
  if (first == "-h" || first == "--help" || first == "--version") return std::nullopt;
  bool has_command = std::any_of(args.begin(), args.end(), IsCommand);
  if (first[0] == '-') {
    // Image flags before the image (`imgcheck -q IMAGE`): the top level has no flags of its own.
    if (!has_command) args.insert(args.begin(), "scan");
    return std::nullopt;
  }
  if (IsCommand(first)) return std::nullopt;
  if (IsBareWord(first)) {
    std::string s = SuggestCommand(first);
    PrintError("unknown command '" + first + "'" +
               (s.empty() ? "" : "; did you mean '" + s + "'?") + " (commands: " + CommandList() +
               "; an image is oci:PATH, dir:PATH, ... or REPO:TAG)");
    return 2;
  }
  args.insert(args.begin(), "scan");  // `imgcheck IMAGE` is `imgcheck scan IMAGE`
  return std::nullopt;
}

}  // namespace

std::string SuggestCommand(std::string_view word) {
  for (const auto& c : Commands())
    if (util::EditDistance(word, c.name) <= 2) return std::string(c.name);
  return "";
}

void PrintError(std::string_view message) {
  std::cerr << "imgcheck: " << report::LogLine(message) << "\n";
}

void DefineApp(CLI::App& app, Runner& run) {
  app.description("imgcheck: find broken CUDA/cuDNN stacks in container images before they ship");
  app.name("imgcheck");
  app.set_version_flag("--version", "imgcheck " + std::string(scan::BuildVersion()));
  app.require_subcommand(1);
  app.footer(kExitCodes);
  for (const auto& c : Commands()) {
    CLI::App* sub = app.add_subcommand(std::string(c.name), std::string(c.summary));
    Runner r = c.define(*sub);
    if (FlagsFromEnvironment(c.name)) SetFlagVariables(*sub);
    sub->callback([&run, r] { run = r; });
  }
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CLI::App app;
  Runner run;
  DefineApp(app, run);
  if (args.empty()) {
    // Bare `imgcheck`: the help, as git and docker do; a script that forgot its arguments still
    // fails (exit 2), a person at a terminal asked for nothing wrong (exit 0).
    std::cout << app.help();
    return isatty(STDOUT_FILENO) ? 0 : 2;
  }
  if (std::optional<int> refused = Rewrite(args)) return *refused;
  MoveRenamedVariables();
  std::reverse(args.begin(), args.end());  // CLI11 takes them in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ExtrasError&) {
    // CLI11 2.1 joins the extras in reverse (rjoin), as if they were still in its reversed
    // argument vector: name them in the order they were given.
    std::string extras;
    for (const std::string& a : app.remaining(true)) extras += (extras.empty() ? "" : " ") + a;
    PrintError("unexpected argument(s): " + extras + " (--help shows the usage)");
    return 2;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, where CLI11 adds "Run with --help for more information." on a second.
    PrintError(std::string(e.what()) + " (--help shows the usage)");
    return 2;
  }
  scan::SetRulesSignatureCheck(RulesSignatureCheck());
  try {
    int status = run();
    std::cerr << util::ProfileText();
    return status;
  } catch (const util::Fatal& e) {
    PrintError(e.what());
    return 2;
  } catch (const std::exception& e) {
    PrintError(std::string("internal error: ") + e.what());
    return 2;
  }
}

// Sanitizer builds: GCC defines __SANITIZE_ADDRESS__, clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define IMGCHECK_FREE_AT_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define IMGCHECK_FREE_AT_EXIT 1
#endif
#endif

int ExitFast(int status) {
#ifndef IMGCHECK_FREE_AT_EXIT
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(status);
#endif
  return status;
}

}  // namespace imgcheck::cli

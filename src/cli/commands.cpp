#include "cli/commands.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "catalog/catalog.h"
#include "util/error.h"
#include "util/text.h"

namespace imgcheck::cli {

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"scan", "check an image's CUDA/cuDNN stack and report findings (the default)", DefineScan},
      {"layers", "list an image's layers with their sizes, history and file counts", DefineLayers},
      {"catalog", "list every CUDA library, driver file and framework, per layer", DefineCatalog},
      {"why", "explain how the loader resolves one soname or path in the image", DefineWhy},
      {"rules", "list the rules or explain one", DefineRules},
      {"probe", "run the image's own cuDNN stack on this host's GPU (runs image code)",
       DefineProbe},
      {"serve", "answer Kubernetes admission, registry pushes and Gatekeeper over HTTPS",
       DefineServe},
  };
  return kCommands;
}

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
  sub.add_option("--creds", args.creds, "USER:PASS for the registry (default: the auth files)");
  sub.add_flag("--tls-verify", args.tls_verify,
               "check the registry's TLS certificate (--tls-verify=false to skip)");
  sub.add_option("--cert-dir", args.cert_dir,
                 "registry CA certificates (*.crt) and client cert/key (*.cert, *.key)");
  sub.add_option("--ca-cert", args.ca_cert, "a CA certificate bundle to trust for the registry");
  sub.add_option("-j,--jobs", args.jobs, "layers read at once (default: one per CPU core)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--cache-dir", args.cache_dir,
                 "layer cache directory (default: $XDG_CACHE_HOME/imgcheck or ~/.cache/imgcheck)");
  sub.add_flag("--no-cache", args.no_cache, "neither use nor fill the layer cache");
  sub.add_option("--cache-max-size", args.cache_max_mb,
                 "bound of the layer cache in MiB; least recently used layers are pruned")
      ->capture_default_str();
  sub.add_flag("-q,--quiet", args.quiet, "no progress line on stderr");
}

image::LoadOptions ToLoadOptions(const ImageArgs& args) {
  image::LoadOptions o;
  o.platform = args.platform;
  o.registry.creds = args.creds;
  o.registry.tls_verify = args.tls_verify;
  o.registry.cert_dir = args.cert_dir;
  o.registry.ca_cert = args.ca_cert;
  o.jobs = args.jobs > 0 ? args.jobs
                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.use_cache = !args.no_cache;
  o.cache_dir = args.cache_dir;
  o.cache_max_bytes = std::min<uint64_t>(args.cache_max_mb, uint64_t{1} << 40) << 20;
  o.progress = !args.quiet;
  // Every subcommand captures what the catalog needs, so cached layers serve them all alike.
  o.capture = catalog::CapturePolicy();
  o.capture_id = catalog::kCapturePolicyId;
  return o;
}

std::string RulesDir() {
  if (const char* env = std::getenv("IMGCHECK_RULES_DIR"); env != nullptr && *env != '\0')
    return env;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path installed = exe.parent_path() / "../share/imgcheck/rules";
    if (std::filesystem::is_directory(installed, ec)) return installed.lexically_normal().string();
  }
  return IMGCHECK_RULES_DIR;
}

namespace {

bool IsCommand(std::string_view word) {
  const auto& cmds = Commands();
  return std::any_of(cmds.begin(), cmds.end(), [&](const Command& c) { return c.name == word; });
}

// A word that looks like a mistyped subcommand rather than an image reference.
std::string Suggest(std::string_view word) {
  if (word.find_first_of(":/.@") != std::string_view::npos) return "";
  for (const auto& c : Commands())
    if (util::EditDistance(word, c.name) <= 2) return std::string(c.name);
  return "";
}

}  // namespace

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // `imgcheck IMAGE` is `imgcheck scan IMAGE`.
  if (!args.empty() && args[0][0] != '-' && !IsCommand(args[0])) {
    if (std::string s = Suggest(args[0]); !s.empty()) {
      std::cerr << "imgcheck: unknown command '" << args[0] << "'; did you mean '" << s << "'?\n";
      return 2;
    }
    args.insert(args.begin(), "scan");
  }

  CLI::App app{"imgcheck: find broken CUDA/cuDNN stacks in container images before they ship"};
  app.set_version_flag("--version", "imgcheck " IMGCHECK_VERSION);
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, std::function<Runner(CLI::App&)>>> subs;
  Runner run;
  for (const auto& c : Commands()) {
    CLI::App* sub = app.add_subcommand(std::string(c.name), std::string(c.summary));
    Runner r = c.define(*sub);
    sub->callback([&run, r] { run = r; });
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    return run();
  } catch (const util::Fatal& e) {
    std::cerr << "imgcheck: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "imgcheck: internal error: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace imgcheck::cli

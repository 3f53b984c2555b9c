// The static analysis that `scan` and `probe` share: rule data, image, catalog, link maps.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "cli/commands.h"
#include "image/image.h"
#include "probe/probe.h"
#include "report/report.h"
#include "rules/config.h"
#include "rules/knowledge.h"
#include "rules/scan.h"
#include "util/sha256.h"

namespace imgcheck::cli {

/// Reads the image, builds its catalog (classified by `input.knowledge`) and every consumer's
/// link map into `input`; an image whose machine the loader does not model gets a note saying
/// so and no link maps. `input.knowledge` and its target are the caller's; `input`
/// points into `image` and `catalog`, which must outlive it.
/// Every regular file under `dir`, by relative path and content, into `h`: the rule data's
/// identity (throws util::Fatal when a file cannot be read).
void HashTree(const std::string& dir, util::Sha256& h);
/// "sha256:HEX" of HashTree(dir) alone.
std::string TreeDigest(const std::string& dir);

void Analyze(const ImageArgs& args, image::Image& image, catalog::Catalog& catalog,
             rules::ScanInput& input);

/// The rule options `scan` and `serve` share: which rules, which config, which target.
struct RuleArgs {
  std::string fail_on;
  std::string config;
  std::vector<std::string> ignore;
  std::vector<std::string> rules_dirs;
  std::string driver, gpu;
  bool host = false;
};
void AddRuleArgs(CLI::App& sub, RuleArgs& args);

/// What every scan of one run (or of one server's life) is judged by, loaded once.
struct Policy {
  std::vector<std::string> rules_dirs;
  rules::Knowledge knowledge;
  rules::Config config;
  rules::FailOn fail_on{rules::Severity::kError};
  rules::Target target;
  /// Digest of the tool version, the rule data, the config and the target: verdicts computed
  /// under another identity are stale.
  std::string identity;
};
Policy LoadPolicy(const RuleArgs& args);

/// Called between the checks and the config (so ignores apply to what it adds): `scan --probe`.
using ExtraFindings = std::function<void(const rules::ScanInput&, report::Report&)>;
/// One image through the whole analysis into a report (all but rendering). The report points
/// into `policy`, which must outlive it.
/// `finish` runs last, while the image is still there (scan --dockerfile maps findings to lines).
report::Report ScanReport(const ImageArgs& image, const Policy& policy,
                          const ExtraFindings& extra = {}, const ExtraFindings& finish = {});

/// Said on stderr before the probe runs: it is opt-in because it runs the image's code.
inline constexpr char kProbeNotice[] =
    "imgcheck probe: running the image's own CUDA libraries on this host (untrusted code, in a "
    "separate process with time limits)\n";

/// How the GPU probe runs, for `probe` and `scan --probe` alike.
struct ProbeRunArgs {
  int timeout = 120;    ///< seconds of wall clock (and of CPU) before the probe is killed
  std::string libcuda;  ///< test-only: a driver library instead of the host's libcuda.so.1
};
/// Adds `timeout_flag` ("--timeout", "--probe-timeout") and the hidden --test-libcuda.
void AddProbeRunArgs(CLI::App& sub, ProbeRunArgs& args, const std::string& timeout_flag);
probe::RunOptions ToRunOptions(const ProbeRunArgs& args);

}  // namespace imgcheck::cli

#include "cli/rule_args.h"

#include "cli/commands.h"

namespace imgcheck::cli {

void AddRuleArgs(CLI::App& sub, scan::PolicyArgs& args) {
  sub.add_option("--fail-on", args.fail_on,
                 "exit 1 when a finding is at or above: none|info|warning|error (default error)");
  sub.add_option("--config", args.config,
                 "config file (default: .imgcheck.yaml/.yml/.json in the working directory)");
  sub.add_option("--ignore", args.ignore, "rule IDs to ignore, comma separated (IC051,IC060)");
  AddRulesArg(sub, args.rules_dirs);
  sub.add_option("--driver", args.driver, "target host driver version (e.g. 535.104.05)");
  sub.add_option("--gpu", args.gpu, "target GPU: sm_XY, X.Y or a name (A100, RTX 4090)");
  sub.add_flag("--host", args.host, "use this host's driver and GPU as the target");
}

void AddProbeRunArgs(CLI::App& sub, ProbeRunArgs& args, const std::string& timeout_flag) {
  sub.add_option(timeout_flag, args.timeout, "seconds before the probe process is killed")
      ->capture_default_str()
      ->check(CLI::Range(1, probe::kMaxProbeSeconds));
  // For tests only: a fake driver library stands in for the host's libcuda.so.1.
  sub.add_option("--test-libcuda", args.libcuda)->group("");
}

probe::RunOptions ToRunOptions(const ProbeRunArgs& args) {
  probe::RunOptions run;
  run.executable = probe::ProbeExecutable();
  run.libcuda = args.libcuda;
  run.wall_seconds = args.timeout;
  run.cpu_seconds = args.timeout;
  return run;
}

}  // namespace imgcheck::cli

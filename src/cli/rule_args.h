// The option groups `scan`, `probe` and `serve` share beyond the image's: rules and the probe.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "probe/probe.h"
#include "scan/policy.h"

namespace imgcheck::cli {

/// --fail-on, --config, --ignore, --rules, --driver, --gpu, --host into `args`.
void AddRuleArgs(CLI::App& sub, scan::PolicyArgs& args);

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

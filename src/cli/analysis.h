// The static analysis that `scan` and `probe` share: rule data, image, catalog, link maps.
#pragma once

#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "cli/commands.h"
#include "image/image.h"
#include "probe/probe.h"
#include "rules/knowledge.h"
#include "rules/scan.h"

namespace imgcheck::cli {

/// Reads the image, builds its catalog (classified by `input.knowledge`) and every consumer's
/// link map into `input`; an image whose machine the loader does not model gets a note saying
/// so and no link maps. `input.knowledge` and its target are the caller's; `input`
/// points into `image` and `catalog`, which must outlive it.
void Analyze(const ImageArgs& args, image::Image& image, catalog::Catalog& catalog,
             rules::ScanInput& input);

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

// `imgcheck probe IMAGE` after the static scan: choose the libraries, stage them, run the
// probe, compare. Shared by `imgcheck probe` and `imgcheck scan --probe`.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "image/image.h"
#include "loader/loader.h"
#include "probe/compare.h"
#include "probe/probe.h"
#include "rules/finding.h"
#include "rules/knowledge.h"
#include "rules/scan.h"
#include "scan/scan.h"
#include "util/formats.h"

namespace imgcheck::probe {

/// Exit status of `imgcheck probe` when there is no NVIDIA driver or no GPU: the probe was
/// skipped (0, 1 and 2 mean what they mean for `scan`).
constexpr int kExitNoGpu = 3;

/// The CUDA libraries the loader resolves for the image's framework: cuDNN, its sub-libraries
/// (dlopened by the libcudnn shim, resolved with dlopen's rules from the shim), cudart and
/// cuBLAS/cuBLASLt, each with the catalog's version, from the link maps of the framework's
/// consumers (every consumer when the image has no framework). Empty when nothing resolves.
Plan PlanFromScan(const rules::ScanInput& scan);

/// Where the probe stood, for reports.
struct Session {
  std::string image;  ///< the reference as the user wrote it
  Plan plan;          ///< in load order
  std::vector<StagedLibrary> staged;
  Observation observation;
  std::vector<rules::Finding> findings;
  std::string cudnn_version;     ///< cudnnGetVersion decoded by rules/ ("9.19.0"); "" if none
  bool no_gpu = false;           ///< no driver or no GPU: skipped, exit kExitNoGpu
  bool nothing_to_load = false;  ///< the loader resolves none of the probed libraries
  std::string skip_reason;
};

/// Plans from `scanned`'s link maps, extracts and stages the libraries from the image scanned
/// (read again, pinned to its manifest digest), runs imgcheck-probe and compares. util::Fatal
/// when the image cannot be read again or is no longer the one scanned.
Session RunSession(const scan::Result& scanned, const RunOptions& run);

/// The probe as a step of `scan --probe`: RunSession on the scan's image, its findings for the
/// report and a note when it could not run. The session stays here for the caller.
class ScanStep : public scan::ProbeStep {
 public:
  explicit ScanStep(RunOptions run) : run_(std::move(run)) {}
  Outcome Run(const scan::Result& scanned) override;
  const Session& session() const { return session_; }

 private:
  RunOptions run_;
  Session session_;
};

/// `imgcheck probe`'s exit status: kExitNoGpu when skipped, 1 with a finding at or above
/// `fail_on` (nullopt: never), else 0.
int ExitCode(const Session& session, std::optional<rules::Severity> fail_on);

enum class ReportFormat : uint8_t { kText, kJson };
/// The one table of `imgcheck probe` output formats.
inline constexpr std::array<util::FormatInfo<ReportFormat>, 2> kReportFormats = {{
    {ReportFormat::kText, "text", "for people"},
    {ReportFormat::kJson, "json", "documented in the README's probe section"},
}};

/// The report in `format`.
std::string Format(const Session& session, ReportFormat format);

}  // namespace imgcheck::probe

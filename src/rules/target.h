// The target machine from what the user or the host says: --driver, --gpu, --host.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rules/knowledge.h"
#include "rules/scan.h"

namespace imgcheck::rules {

/// The kernel module version in /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64
/// Kernel Module  535.104.05  Sat Aug 19 ..."); nullopt when absent.
std::optional<Version> ParseProcDriverVersion(std::string_view text);

/// The first GPU of `nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader`
/// ("NVIDIA A100-SXM4-80GB, 8.0, 535.104.05").
struct SmiGpu {
  std::string name;
  std::optional<int> sm;
  std::optional<Version> driver;
};
std::optional<SmiGpu> ParseNvidiaSmi(std::string_view csv);

/// Sets `target.driver` from --driver; util::Fatal when it is not a version.
void SetDriver(Target& target, std::string_view version, std::string from);
/// Sets `target.sm` from --gpu (sm_XY, X.Y or a GPU name); util::Fatal (with the known names'
/// closest match) when unknown.
void SetGpu(Target& target, std::string_view gpu, const Knowledge& knowledge, std::string from);
/// Adds a note for each target-dependent rule that stays silent.
void NoteMissingTarget(Target& target, const Knowledge& knowledge);

/// A rule of the table that could not run, and why (CI reports show it as skipped).
struct NotRun {
  std::string rule;
  std::string reason;       ///< "no target driver (--driver VERSION or --host)"
  bool for_target = false;  ///< silent for lack of a target (else: only the GPU probe checks it)
};
/// What NoteMissingTarget's notes say between the rule and the reason.
inline constexpr std::string_view kStaysSilent = " stays silent: ";
/// The rules that stay silent for lack of a target, and, when `no_probe` says why the GPU probe
/// did not run ("" when it ran), those only it checks (rules without a static check), in table
/// order.
std::vector<NotRun> RulesNotRun(const Target& target, const Knowledge& knowledge,
                                const std::vector<std::string>& static_rules,
                                std::string_view no_probe);

}  // namespace imgcheck::rules

// A finding: one problem a rule found, with everything a person needs to act on it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/loader.h"

namespace imgcheck::rules {

enum class Severity : uint8_t { kInfo, kWarning, kError };
/// "info", "warning", "error".
std::string_view SeverityName(Severity severity);
/// Inverse of SeverityName; nullopt for anything else.
std::optional<Severity> ParseSeverity(std::string_view name);

/// The layer that put the finding's main path into the image.
struct LayerRef {
  int index = -1;  ///< -1: not tied to a layer (image configuration, target)
  std::string digest;
  std::string created_by;  ///< the history line
};

/// One step of evidence: how a version was learned or how the loader resolved a name.
struct Evidence {
  std::string label;  ///< "resolved", "compiled cuDNN", "searched", ...
  std::string value;  ///< "12.1", "/opt/a /opt/b"; empty when `resolution` is set
  /// How the loader resolved a name: report renders the value from it
  /// ("/usr/lib/x86_64-linux-gnu/libcudnn.so.8 (ld-library-path /usr/lib/x86_64-linux-gnu)").
  std::optional<loader::Resolution> resolution = std::nullopt;
};

/// "resolved NAME" evidence carrying the loader's resolution of `r`.
Evidence ResolvedEvidence(const loader::Resolution& r);
/// Why `r` did not resolve, in IC012's words: "not found; tried DIR..." (each directory once, in
/// search order), "not found" when nothing was tried, or "error: " and ld.so's message.
std::string UnresolvedText(const loader::Resolution& r);
/// The Dockerfile instruction a finding traces back to (scan --dockerfile).
struct SourceLine {
  std::string path;         ///< the Dockerfile, relative to the repository root where there is one
  int line = 0;             ///< first line of the instruction, 1-based
  int end_line = 0;         ///< last line (continuations, heredocs)
  std::string instruction;  ///< the instruction on one line ("ENV LD_LIBRARY_PATH=/opt/lib")
};

struct Finding {
  std::string rule;  ///< "IC001"
  std::string name;  ///< "cudnn-version-mismatch"
  Severity severity = Severity::kError;
  std::string message;             ///< one paragraph, names the versions and files involved
  std::vector<std::string> paths;  ///< paths inside the image, the main one first
  LayerRef layer;
  std::string remediation;
  std::vector<Evidence> evidence;
  /// The image configuration variable the finding is about ("LD_LIBRARY_PATH"), "" if none: it
  /// leads from a configuration finding to the ENV line that set it.
  std::string env;
  std::optional<SourceLine> dockerfile;  ///< set only when the scan was given --dockerfile
  /// With --dockerfile, a finding the configuration causes is on the ENV/ARG line (`dockerfile`);
  /// the instruction that wrote the file is here (SARIF relatedLocations). Empty otherwise.
  std::optional<SourceLine> written_by;
  /// Expected by design (a library laid out as an NVIDIA release installs it): kept in JSON,
  /// SARIF and the exit code, shown in the text report only with --verbose.
  bool quiet = false;
  /// Stable across rebuilds and version bumps (rule, owning package, library base name, env):
  /// what baselines, diffs and SARIF match findings by. Filled once by the scan
  /// (scan::AssignFingerprints), after the checks; "" in findings built elsewhere.
  std::string fingerprint;
  /// Matched by the --baseline report (or, in a diff, already in the old image): reported as
  /// such, and left out of the exit code.
  bool baseline = false;
};

}  // namespace imgcheck::rules

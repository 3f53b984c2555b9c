// The compatibility data of rules/*.json, typed and checked: what the checks consult instead of
// hard-coding release facts. Loading validates every row and reports `file:line: message`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/library_rules.h"
#include "loader/loader.h"
#include "loader/session.h"
#include "rules/finding.h"
#include "rules/version.h"
#include "util/data_file.h"

namespace imgcheck::rules {

using util::DataFile;
using util::LoadDataFiles;
using util::ParseDataFile;
using util::Row;
using util::TableRows;

/// A rule of the catalogue (rules.json).
struct RuleInfo {
  std::string id, name;
  Severity severity = Severity::kError;
  std::string summary, breaks, remediation, source;
  std::vector<std::string> errors;  ///< real error text users see
  std::string needs_target;         ///< "driver", "gpu", or "" when the rule needs no target
};

struct DriverRow {
  Version cuda, min_driver;
  std::string release, source;
};
struct MinorCompatRow {
  int cuda_major = 0;
  Version min_driver;
  std::string source;
};
struct CudaSmRow {
  int cuda_major = 0, min_sm = 0, max_sm = 0;
  std::string source;
};
struct CudnnEncodingRow {
  int from_major = 0, to_major = 0, major_scale = 0, minor_scale = 0;
};
struct CudnnReleaseRow {
  Version from, to;
  std::vector<int> cuda_majors;
  int min_sm = 0, max_sm = 0;  ///< max 0: not stated
  std::string source;
};
struct TensorflowBuildRow {
  Version tensorflow, cudnn, cuda;
  std::string package, source;
};
struct TorchBuildRow {
  Version torch, cuda, cudnn;
  std::string channel, source;
};
struct JaxPluginRow {
  std::string plugin, module;
  int cuda_major = 0, min_sm = 0;
  Version built_cuda, built_cudnn, min_cuda, min_cudnn, max_cudnn, min_driver;
  Version from, to;  ///< the plugin releases the row describes; empty: any (a fallback)
  std::string source;
};
struct OnnxruntimeRow {
  Version from, to, cuda, cudnn;
  int cudnn_major = 0;
  std::string source;
};
/// The release of a package built for one framework release (frameworks.json companions, read
/// from the package's own wheel METADATA): torchvision 0.21 for torch 2.6.
struct CompanionRow {
  std::string framework;  ///< the framework's distribution ("torch")
  Version release;        ///< its release (major.minor)
  std::string package;    ///< the package's distribution ("torchvision")
  Version version;        ///< the package's release built for it
  std::string source;
};
struct CupyRow {
  std::string package;
  int cuda_major = 0;
  std::string source;
};
/// A framework's run-time acceptance of a loaded cuDNN against the compiled one.
struct AcceptanceRow {
  std::string framework;
  Version from, to;                   ///< framework releases this applies to
  bool minor_at_least = false;        ///< loaded minor >= compiled minor (else equal)
  int minor_at_least_from_major = 0;  ///< ... also when the compiled major is at least this
  std::string message;                ///< the framework's error text with {placeholders}
  std::string version_format;         ///< "int", "dotted", "tuple"
  std::string source;
};
struct SmFloorRow {
  std::string framework;
  Version cudnn_from;
  int min_sm = 0;
  std::string message, source;
};
struct GpuRow {
  std::string name;
  int sm = 0;
  std::string source;
};
struct ArchRow {
  int min_sm = 0, max_sm = 0;
  std::string name;
};
using PreloadRow = loader::PreloadRow;
/// A call a package offers to load the nvidia-* wheels' libraries itself (dlopen.json's
/// preload_calls table): the user makes it, so it is a fix, not a load the simulation applies.
struct PreloadCallRow {
  std::string package;  ///< glob on the owning pip distribution
  Version from;         ///< first release with the call
  std::string call, before, source;
};
using OptionalRow = loader::OptionalRow;
/// The shared objects of one NVIDIA library wheel release (libraries.json wheel_libraries, read
/// from the wheels on PyPI): which project ships a soname, and where it installs it.
struct WheelLibrariesRow {
  std::string project, version, dir;   ///< dir: relative to site-packages ("nvidia/cu13/lib")
  std::vector<std::string> libraries;  ///< file names (the sonames the wheel ships)
};
/// A framework that runs on the CPU when its GPU libraries do not load (dlopen.json's
/// cpu_fallback table): with none of them in the image, their unresolved dlopens are info.
struct CpuFallbackRow {
  std::string caller;              ///< glob on the calling object's soname or file name
  std::vector<std::string> names;  ///< globs on the library names
  std::string runs, source;
};
struct SublibrarySet {
  int major = 0;
  std::vector<std::string> libraries;
};  ///< base names

/// The schema of rules/ this binary reads (version.json's `schema`). Data of another schema
/// (an update published for a newer imgcheck) is not used.
inline constexpr int kRulesSchema = 1;

/// Which data a result was judged by: the date of the newest fact (version.json's `date`,
/// written by tools/rules_from_artifacts.py or with a hand-edited fact) and a SHA-256 over the
/// content of every file in use (name and JSON value, canonically encoded, in load order), so
/// two copies of the same data have the same version whatever their whitespace or location.
struct DataVersion {
  std::string date;    ///< YYYY-MM-DD; "" when no version.json says
  int schema = 0;      ///< 0 when no version.json says
  std::string digest;  ///< hex SHA-256 of the content
  /// "2026-11-25+1a2b3c4d5e6f" (the digest's first 12 hex digits), or "+1a2b..." without date.
  std::string str() const;
  /// True when this data is newer than `other`: a later date, or the same date and another
  /// digest never counts as newer (an update must move the date).
  bool NewerThan(const DataVersion& other) const { return date > other.date; }
};

class Knowledge {
 public:
  /// Loads and validates the files of `dirs` (the built-in rules dir first, then --rules
  /// dirs), every one of them once. util::Fatal("file:line: message") for malformed data, and
  /// when rules.json or libraries.json is missing.
  static Knowledge Load(const std::vector<std::string>& dirs);
  /// From already parsed files (tests).
  static Knowledge FromFiles(std::vector<DataFile> files);

  const std::vector<DataFile>& files() const { return files_; }
  /// The version of the data in use (every file, --rules dirs included).
  const DataVersion& version() const { return version_; }
  /// The library classification the catalog uses (libraries.json).
  const catalog::LibraryRules& libraries() const { return libraries_; }
  /// The dlopen lists of dlopen.json.
  const std::vector<loader::DlopenRule>& dlopen() const { return dlopen_; }
  /// The preload rows of dlopen.json.
  const std::vector<PreloadRow>& preload() const { return preload_; }
  const std::vector<PreloadCallRow>& preload_calls() const { return preload_calls_; }
  /// The imports rows of dlopen.json: what `import <package>` loads, with its dlopen flags.
  const std::vector<PreloadRow>& imports() const { return imports_; }
  /// The optional table of dlopen.json.
  const std::vector<OptionalRow>& optional() const { return optional_; }
  const std::vector<loader::OnCallRow>& on_call() const { return on_call_; }
  const std::vector<CpuFallbackRow>& cpu_fallback() const { return cpu_fallback_; }
  const std::vector<WheelLibrariesRow>& wheel_libraries() const { return wheel_libraries_; }
  const std::vector<RuleInfo>& rules() const { return rules_; }
  const RuleInfo* Rule(std::string_view id) const;  ///< by ID or name, case-insensitive
  /// The closest rule ID or name to a mistyped `word`, "" when nothing is close.
  std::string SuggestRule(std::string_view word) const;

  /// The driver CUDA `cuda` needs: for majors with minor-version compatibility the major's
  /// minimum; otherwise the lowest toolkit-table driver among releases matching `cuda`'s known
  /// components. `how` says which rule applied. Nullopt when the data has no row.
  std::optional<Version> MinDriver(const Version& cuda, std::string* how = nullptr) const;
  const MinorCompatRow* MinorCompat(int cuda_major) const;
  const CudaSmRow* CudaSm(int cuda_major) const;
  /// True when `dir` is a directory the container runtime mounts (the driver volume).
  bool IsContainerMount(std::string_view dir) const;

  /// CUDNN_VERSION integer -> version (8907 -> 8.9.7, 91002 -> 9.10.2); nullopt if no encoding
  /// fits.
  std::optional<Version> DecodeCudnn(long value) const;
  /// Version -> CUDNN_VERSION integer (missing components 0); -1 when no encoding fits.
  long EncodeCudnn(const Version& v) const;
  const CudnnReleaseRow* CudnnRelease(const Version& cudnn) const;
  const std::vector<SublibrarySet>& cudnn_sublibraries() const { return sublibraries_; }

  const TensorflowBuildRow* TensorflowBuild(const Version& tensorflow) const;
  const TorchBuildRow* TorchBuild(const Version& torch, const Version& cuda) const;
  const std::vector<JaxPluginRow>& jax_plugins() const { return jax_; }
  const OnnxruntimeRow* OnnxruntimeBuild(const Version& ort) const;
  const std::vector<CupyRow>& cupy() const { return cupy_; }
  /// The release of `package` built for `framework` `release` (compared on major.minor); null
  /// when the data has no row.
  const CompanionRow* Companion(std::string_view framework, const Version& release,
                                std::string_view package) const;
  /// True when the companions table has a row for `package` built for `framework`.
  bool HasCompanions(std::string_view framework, std::string_view package) const;
  const AcceptanceRow* Acceptance(std::string_view framework, const Version& version) const;
  const SmFloorRow* SmFloor(std::string_view framework, const Version& cudnn) const;

  /// The newest release of `what` the data has a row for, with that row in words ("torch_builds
  /// row torch 2.15 / CUDA 13.2 (source)"): "torch", "tensorflow", a jax plugin
  /// ("jax-cuda12-plugin": the newest `to`, and the plugin's fallback row), "cuda" (cuda_driver and
  /// cuda_releases), "cudnn" (the newest cuDNN any framework table names). Nullopt when no row
  /// names one.
  struct KnownRelease {
    Version version;
    std::string row;
  };
  std::optional<KnownRelease> NewestKnown(std::string_view what) const;

  /// "sm_86", "86", "8.6" or a GPU name ("NVIDIA A100-SXM4-80GB") -> SM; nullopt if unknown.
  std::optional<int> GpuSm(std::string_view gpu) const;
  /// "Ampere" for 86; "" when unknown.
  std::string ArchName(int sm) const;

 private:
  std::vector<DataFile> files_;
  DataVersion version_;
  catalog::LibraryRules libraries_;
  std::vector<loader::DlopenRule> dlopen_;
  std::vector<PreloadRow> preload_;
  std::vector<PreloadRow> imports_;
  std::vector<PreloadCallRow> preload_calls_;
  std::vector<OptionalRow> optional_;
  std::vector<loader::OnCallRow> on_call_;
  std::vector<CpuFallbackRow> cpu_fallback_;
  std::vector<WheelLibrariesRow> wheel_libraries_;
  std::vector<CompanionRow> companions_;
  std::vector<RuleInfo> rules_;
  std::vector<DriverRow> drivers_;
  std::vector<Version> cuda_releases_;  ///< cuda.json cuda_releases (the cuda-toolkit wheels)
  std::vector<MinorCompatRow> minor_compat_;
  std::vector<CudaSmRow> cuda_sm_;
  std::vector<std::string> mounts_;
  std::vector<CudnnEncodingRow> encodings_;
  std::vector<CudnnReleaseRow> cudnn_releases_;
  std::vector<SublibrarySet> sublibraries_;
  std::vector<TensorflowBuildRow> tensorflow_;
  std::vector<TorchBuildRow> torch_;
  std::vector<JaxPluginRow> jax_;
  std::vector<OnnxruntimeRow> onnxruntime_;
  std::vector<CupyRow> cupy_;
  std::vector<AcceptanceRow> acceptance_;
  std::vector<SmFloorRow> sm_floor_;
  std::vector<GpuRow> gpus_;
  std::vector<ArchRow> archs_;
};

/// A finding of `rule` with the table's name, severity and remediation, and `message`: how the
/// checks and the probe make every finding. A rule the table lacks (a --rules directory without
/// probe.json) is named by its ID.
Finding MakeFinding(const Knowledge& knowledge, std::string_view rule, std::string message);

}  // namespace imgcheck::rules

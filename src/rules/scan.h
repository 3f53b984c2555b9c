// The scan: which objects of the image to load (framework extensions, CUDA libraries, CUDA
// executables), how the loader resolves each, and the checks over catalog + resolutions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "image/image.h"
#include "loader/loader.h"
#include "rules/finding.h"
#include "rules/knowledge.h"
#include "rules/version.h"

namespace imgcheck::rules {

/// The machine the image is meant to run on. Rules that need it stay silent without it.
struct Target {
  std::optional<Version> driver;   ///< kernel driver version ("535.104.05")
  std::string driver_from;         ///< "--driver", "/proc/driver/nvidia/version", ...
  std::optional<int> sm;           ///< GPU compute capability x10
  std::string gpu_from;            ///< "--gpu A100", "nvidia-smi: NVIDIA A100-SXM4-80GB"
  std::vector<std::string> notes;  ///< why a part of the target is missing, for the report
};

/// One root the loader was run for, and its link map.
struct Consumer {
  std::string path;  ///< real path in the image
  std::string role;  ///< "framework torch", "cuda-library cudnn", "executable", "library"
  loader::LoadGraph graph;
  std::string package;  ///< its owner: "flash-attn 2.5.8", "dpkg libfoo 1.0", "unowned in /app"
  /// Non-empty when the root cannot run as shipped: its first own non-CUDA dependency that
  /// does not resolve either ("libtorch.so"). Such a consumer is no gate for CUDA checks.
  std::string not_runnable;
  /// Non-empty when its package loads it only on request (dlopen.json optional): "onnxruntime-gpu
  /// loads it when the TensorrtExecutionProvider is requested". Its CUDA gaps are info.
  std::string optional;
};

/// Everything the checks read.
struct ScanInput {
  const image::Image* image = nullptr;
  const catalog::Catalog* catalog = nullptr;
  const Knowledge* knowledge = nullptr;
  Target target;
  loader::Options options;
  std::vector<Consumer> consumers;
};

/// Loader options for the image: its Env's LD_LIBRARY_PATH, WorkingDir, ld.so.cache, the
/// platform of its glibc (loader::ImagePlatform), and `dlopen`. The error of an image whose
/// machine the loader does not model.
util::Expected<loader::Options> LoaderOptions(const image::Image& image,
                                              const catalog::Catalog& catalog,
                                              std::vector<loader::DlopenRule> dlopen);

/// The top package directory of a framework: the component after site-packages/ or
/// dist-packages/ ("/usr/lib/python3/dist-packages/torch"), else the build file's directory.
std::string FrameworkPackageDir(const catalog::Component& fw);

/// "flash-attn 2.5.8" (pip), "dpkg libfoo 1.0", "conda cupy 13.0", or "unowned in <dir>".
std::string PackageLabel(const catalog::Catalog& catalog, std::string_view path);

/// The consumers worth loading (at most `limit`): every ELF under a framework's package
/// directory, every CUDA library of the catalog, then every other executable or shared object
/// whose DT_NEEDED names a library that libraries.json classifies (a CUDA family or the
/// driver). A consumer owned by a package of `knowledge`'s preload table is loaded with what
/// that package preloads already in the process.
std::vector<Consumer> LoadConsumers(const image::Image& image, const catalog::Catalog& catalog,
                                    const Knowledge& knowledge, const loader::Options& options,
                                    size_t limit = 2000);

/// Runs every check, in rule ID order; the findings in the order the checks made them (the
/// caller sorts once, with whatever else joins them: scan::Run).
std::vector<Finding> RunChecks(const ScanInput& input);
/// The order of every report: by severity (errors first), then rule, then path (stable).
void SortFindings(std::vector<Finding>& findings);

/// IDs of the rules that have a check, sorted (each must be in the catalogue).
std::vector<std::string> ImplementedRules();

}  // namespace imgcheck::rules

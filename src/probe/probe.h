// The host side of the GPU probe: what to load, running imgcheck-probe on it, and what it saw.
// The probe runs the image's own libraries (untrusted code) in a separate process with limits.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace imgcheck::probe {

/// One library the probe loads, as the static scan resolved it inside the image.
struct PlannedLibrary {
  std::string role;                 ///< "cudart", "cudnn", "cudnn_ops", "cublasLt", ... (RoleOf)
  std::string soname;               ///< the name it is loaded by ("libcudnn.so.9")
  std::string image_path;           ///< the file the loader resolves for it, symlinks followed
  int layer = -1;                   ///< the layer that wrote image_path
  std::string version;              ///< the static scan's version ("9.1.0"); empty when unknown
  std::vector<std::string> needed;  ///< its NEEDED sonames, for the load order
};

/// The libraries to load and the static predictions they carry.
struct Plan {
  std::vector<PlannedLibrary> libraries;
};

/// "cudart" for libcudart.so.12, "cudnn" for libcudnn.so.9, "cudnn_ops" for libcudnn_ops.so.9,
/// "cublasLt" for libcublasLt.so.12: the library's base name without "lib" and the suffix.
std::string RoleOf(std::string_view soname);

/// The libraries in dependency order (each after the libraries of the plan it needs), ties kept
/// in plan order; a dependency cycle keeps plan order for the rest.
std::vector<PlannedLibrary> LoadOrder(const Plan& plan);

/// What imgcheck-probe reported, parsed. Fields are empty/nullopt where the probe did not get
/// that far.
struct Observation {
  enum class Outcome { kRan, kNoGpu, kCrashed, kTimedOut, kBadOutput };
  Outcome outcome = Outcome::kBadOutput;
  std::string reason;      ///< no GPU, crash or bad-output explanation
  std::string last_stage;  ///< the last stage the probe announced on stderr

  // The host: driver and GPU.
  std::optional<int> driver_version;  ///< cuDriverGetVersion: 12080 is 12.8
  std::string gpu, sm;
  std::optional<int64_t> memory_bytes;

  struct Load {
    std::string role, path, error;
    bool loaded = false;
  };
  std::vector<Load> libraries;

  std::optional<int> runtime_version;         ///< cudaRuntimeGetVersion
  std::optional<int> runtime_driver_version;  ///< cudaDriverGetVersion
  std::optional<int> first_call;              ///< cudaMalloc's cudaError_t
  std::string first_call_name, cudart_error;

  std::optional<int64_t> cudnn_version;         ///< cudnnGetVersion
  std::optional<int64_t> cudnn_cudart_version;  ///< cudnnGetCudartVersion
  std::string cudnn_error;
  struct Check {
    std::string sublibrary, symbol, status_name, error;
    std::optional<int> status;
  };
  std::vector<Check> sublibraries;
  std::optional<int> create_status;
  std::string create_status_name, create_error;

  struct Convolution {
    bool ran = false, passed = false;
    std::string failed_at, status_name, error, shape;
    std::optional<int> status;
    double tolerance = 0, max_abs_error = 0, expected = 0, got = 0, first_ms = 0, mean_ms = 0;
  } convolution;

  std::vector<std::string> loaded_objects;  ///< every file-backed object in the probe process
  std::string json;                         ///< the probe's stdout as printed
};

/// Parses imgcheck-probe's JSON. A malformed document gives Outcome::kBadOutput with a reason.
Observation ParseObservation(std::string_view text);

/// The longest --timeout: a day, far inside what imgcheck-probe's own limits accept.
inline constexpr int kMaxProbeSeconds = 86400;

struct RunOptions {
  std::filesystem::path executable;  ///< imgcheck-probe; see ProbeExecutable()
  std::string libcuda;               ///< test-only: a driver library instead of libcuda.so.1
  int wall_seconds = 120;            ///< the child is killed (SIGKILL, its process group) after it
  int cpu_seconds = 60;              ///< RLIMIT_CPU inside the child
};

/// imgcheck-probe next to the running executable (or $IMGCHECK_PROBE_HELPER when set).
std::filesystem::path ProbeExecutable();

/// Runs imgcheck-probe on `libraries` ({role, absolute path}, loaded in that order) with a clean
/// loader environment (no LD_LIBRARY_PATH or LD_PRELOAD from this process), and parses what it
/// printed. A crash, a kill or a timeout is an Outcome, never an exception.
Observation RunProbe(const std::vector<std::pair<std::string, std::string>>& libraries,
                     const RunOptions& options);

}  // namespace imgcheck::probe

// Test fixture: a fake CUDA driver, runtime and cuDNN (shim + sub-libraries) compiled from the C
// sources in fakes/, each failure mode chosen by a field.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace imgcheck::probe::testing {

struct FakeStack {
  int driver_version = 12080;
  bool no_device = false;
  int runtime_version = 12080;
  int cudnn_version = 91900;  ///< 8902 builds a cuDNN 8 stack (six sub-libraries)
  int cudnn_cudart_version = 12080;
  std::map<std::string, int> sublibrary_versions;  ///< "ops" -> 91800: a skewed sub-library
  std::set<std::string> missing;                   ///< sub-libraries left out ("cnn")
  bool wrong_result = false, crash = false, hang = false;
  int conv_status = 0;  ///< cudnnConvolutionForward fails with this status when non-zero
};

struct BuiltStack {
  std::filesystem::path libcuda;  ///< the fake driver, outside lib_dir
  std::filesystem::path lib_dir;  ///< the materialised image libraries
  /// {role, absolute path} in load order: cudart, the sub-libraries, cudnn.
  std::vector<std::pair<std::string, std::string>> libraries;
};

/// Compiles the stack into `dir` (compiled objects are cached per process by their flags).
BuiltStack Build(const FakeStack& stack, const std::filesystem::path& dir);

/// The sub-libraries of a cuDNN major version, as abi.h lists them.
std::vector<std::string> Sublibraries(int cudnn_version);

}  // namespace imgcheck::probe::testing

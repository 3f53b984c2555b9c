// The classification data of rules/libraries.json: which file names are which CUDA library or
// driver file, which packages may state their version, and which files of an image the catalog
// reads (version headers, framework build files). Typed once from the loaded rule files.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "util/data_file.h"

namespace imgcheck::catalog {

/// A version line of a family: versions that compare with each other and with no other line's.
struct VersionLine {
  std::string line;     ///< "calendar"
  std::string version;  ///< glob on the version text ("20[0-9][0-9].*")
  std::string source;
};

struct Family {
  std::string family;  ///< "cudnn", "cublas", "driver", ...
  ComponentKind kind = ComponentKind::kCudaLibrary;
  std::vector<std::string> libraries;  ///< globs on the base name (file name up to ".so")
  std::vector<std::string> exclude;
  std::vector<std::string> dpkg, pip, conda;  ///< globs on package names that version it
  std::vector<std::string> headers;           ///< version header file names (globs)
  std::vector<std::string> version_json;      ///< version.json component keys
  /// Libraries a major's shim dlopens, by major (cuDNN: {8: [libcudnn_ops_infer, ...]}).
  std::map<int, std::vector<std::string>> sub_libraries;
  /// The lines besides the family's component line (CUPTI's calendar versions, 2024.1.0).
  std::vector<VersionLine> version_lines;
  std::string source;

  /// The line `version` belongs to: the first of version_lines whose glob matches it, "" (the
  /// component line, 12.4.127) when none does.
  std::string_view LineOf(std::string_view version) const;
};

/// A framework's build facts file (table framework_files).
struct FrameworkFile {
  std::string path;       ///< glob on the path's last components ("torch/version.py")
  std::string framework;  ///< the framework's name; empty: from the file's directory
  bool json = false;      ///< format "json" (cupy's _wheel.json); else Python literals
  std::string source;
};

/// A framework known by its pip distribution when no build facts file of it is in the image
/// (table framework_dists): TF 1.x wheels have no build_info.py, onnxruntime-gpu 1.19 no
/// build_and_package_info.py.
struct FrameworkDist {
  std::string dist;       ///< glob on the PEP 503 name ("tensorflow-gpu", "jax-cuda1*-plugin")
  std::string framework;  ///< the framework's name; empty: the distribution's
  std::string module;     ///< its package directory in site-packages; empty: the name with '_'
  std::string source;
};

struct LibraryRules {
  std::vector<Family> families;
  std::vector<std::string> stub_dirs;    ///< a directory component named so marks a stub
  std::vector<std::string> compat_dirs;  ///< ... a forward-compatibility library
  /// Globs on directories where NVIDIA's release archives (runfile, tarball) install
  /// libraries: an unpackaged library there is the documented install.
  std::vector<std::string> release_dirs;
  std::vector<FrameworkFile> framework_files;
  std::vector<FrameworkDist> framework_dists;
  /// Globs on package names the catalog lists though no family versions them ("cuda-*").
  std::vector<std::string> cuda_packages;

  /// Types the last libraries.json among `files` and the framework_files / cuda_packages
  /// tables of every file. util::Fatal("file:line: message") for a malformed row; empty rules
  /// when no file is named libraries.json.
  static LibraryRules FromFiles(const std::vector<util::DataFile>& files);

  /// The family whose `libraries` match `base_name` ("libcudnn_ops"), or null.
  const Family* Classify(std::string_view base_name) const;
  /// The family a package of `manager` named `name` versions, or null.
  const Family* ByPackage(PackageManager manager, std::string_view name) const;
  /// The family with this version header file name, or null.
  const Family* ByHeader(std::string_view file_name) const;
  /// The family named `family`, or null.
  const Family* Find(std::string_view family) const;
  /// The framework the pip distribution `name` (PEP 503) is, or null.
  const FrameworkDist* FrameworkByDist(std::string_view name) const;
  /// The framework build file `path` is, or null.
  const FrameworkFile* Framework(std::string_view path) const;
  /// True when the catalog lists a package of this name: a family versions it, or it is one
  /// of the CUDA repository's.
  bool IsCudaPackage(PackageManager manager, std::string_view name) const;
  /// A digest of the data that decides which files are captured (CapturePolicy): part of the
  /// layer cache's identity, so a layer read under other rule data is read again.
  std::string CaptureDigest() const;
};

}  // namespace imgcheck::catalog

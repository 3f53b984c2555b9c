// The library families of rules/libraries.json: which file names are which CUDA library or
// driver file, and which packages may state their version.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "util/error.h"

namespace imgcheck::catalog {

struct Family {
  std::string family;  ///< "cudnn", "cublas", "driver", ...
  ComponentKind kind = ComponentKind::kCudaLibrary;
  std::vector<std::string> libraries;  ///< globs on the base name (file name up to ".so")
  std::vector<std::string> exclude;
  std::vector<std::string> dpkg, pip, conda;  ///< globs on package names that version it
  std::vector<std::string> headers;           ///< version header file names (globs)
  std::vector<std::string> version_json;      ///< version.json component keys
  std::string source;
};

struct LibraryRules {
  std::vector<Family> families;
  std::vector<std::string> stub_dirs;    ///< a directory component named so marks a stub
  std::vector<std::string> compat_dirs;  ///< ... a forward-compatibility library

  /// The family whose `libraries` match `base_name` ("libcudnn_ops"), or null.
  const Family* Classify(std::string_view base_name) const;
  /// The family a package of `manager` named `name` versions, or null.
  const Family* ByPackage(PackageManager manager, std::string_view name) const;
  /// The family with this version header file name, or null.
  const Family* ByHeader(std::string_view file_name) const;
};

/// Parses the JSON text of libraries.json.
util::Expected<LibraryRules> ParseLibraryRules(std::string_view json);
/// Reads `rules_dir`/libraries.json; util::Fatal when it is missing or malformed.
LibraryRules LoadLibraryRules(const std::string& rules_dir);

}  // namespace imgcheck::catalog

// Parsers for the metadata files the catalog reads: package databases, version headers and
// framework build files. Each works on the file's text only, is bounded by it, and never prints.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "util/error.h"

namespace imgcheck::catalog {

/// "libcudnn_ops.so.9.1.0" -> "libcudnn_ops"; "" when the name has no ".so" part. A library
/// vendored by auditwheel answers to its original base name: "libcudnn-74a4c495.so.9.1.0" ->
/// "libcudnn" (auditwheel repair grafts each library as <base>-<8 hex of its digest>.so...,
/// SONAME rewritten the same way, into <dist>.libs/ or <pkg>/.libs/).
std::string_view LibraryBaseName(std::string_view file_name);
/// The name a vendored library had before auditwheel renamed it ("libcudnn-74a4c495.so.9.1.0"
/// -> "libcudnn.so.9.1.0"); any other name unchanged.
std::string UnvendoredName(std::string_view file_name);
/// True for an auditwheel-style renaming ("lib<name>-<8 hex>.so...").
bool IsVendoredName(std::string_view file_name);
/// "libcudnn.so.8.9.2" -> "8.9.2"; "" when nothing numeric follows ".so.".
std::string FilenameVersion(std::string_view file_name);
/// Debian version -> upstream part: "1:8.9.2.26-1+cuda12.1" -> "8.9.2.26".
std::string UpstreamVersion(std::string_view dpkg_version);
/// Number of dot-separated numeric fields at the start: "8.9.2.26" -> 4, "12.x" -> 1.
int VersionPrecision(std::string_view version);
/// PEP 503 name normalisation: lowercase, runs of '-', '_', '.' become one '-'.
std::string NormalizeDistName(std::string_view name);

struct DpkgPackage {
  std::string name, version, architecture, status;
  bool auto_installed = false;  ///< apt's extended_states "Auto-Installed: 1"
};
/// /var/lib/dpkg/status (or a status.d file, or apt's extended_states): one record per
/// paragraph.
std::vector<DpkgPackage> ParseDpkgStatus(std::string_view text);

/// One library line of a dpkg md5sums file ("<32 hex>  usr/lib/x/libfoo.so.1").
struct Md5sumsLibrary {
  std::string md5;   ///< as stated, 32 hex digits
  std::string path;  ///< absolute: "/usr/lib/x/libfoo.so.1"
};
/// The lines of an md5sums text that name a library (".so" in the path); others are skipped.
std::vector<Md5sumsLibrary> ParseMd5sumsLibraries(std::string_view text);

/// METADATA / PKG-INFO header fields (up to the first blank line).
struct DistMetadata {
  std::string name, version;
  std::vector<Requirement> requires_dist;
};
DistMetadata ParseDistMetadata(std::string_view text);
/// The package names conda's history says were asked for (`# update specs: ['cudnn=8.9',
/// 'numpy']`, `# install specs: [...]`), in order, without their version constraints.
std::vector<std::string> ParseCondaHistorySpecs(std::string_view text);
/// The package names a shell command line asks a package manager to install: `apt-get install`
/// / `apt install` (manager "apt") or `pip install` / `pip3 install` / `python3 -m pip install`
/// ("pip"), options and version constraints dropped ("libcudnn8=8.9.2.26-1+cuda12.1" ->
/// "libcudnn8"), up to the next `&&`, `||`, `;` or `|`.
std::vector<std::string> InstalledOnCommandLine(std::string_view command, std::string_view manager);

/// One `Requires-Dist:` value: "nvidia-cudnn-cu12 (==8.9.2.26) ; platform_system == 'Linux'".
Requirement ParseRequirement(std::string_view value);
/// One row of a wheel RECORD: the path and, when stated, the file's size in bytes.
struct RecordEntry {
  std::string path;
  std::optional<uint64_t> size;
};
/// The rows of a wheel RECORD (CSV: path, hash, size; quoted fields handled).
std::vector<RecordEntry> ParseRecord(std::string_view text);

struct CondaPackage {
  std::string name, version, build;
  std::vector<std::string> files;  ///< relative to the environment prefix
};
util::Expected<CondaPackage> ParseCondaMeta(std::string_view json);

/// cudnn_version.h / cudnn.h: "MAJOR.MINOR.PATCH" from CUDNN_MAJOR/MINOR/PATCHLEVEL defines.
std::optional<std::string> CudnnHeaderVersion(std::string_view text);
/// cuda_runtime_api.h: CUDART_VERSION 12010 -> "12.1".
std::optional<std::string> CudartHeaderVersion(std::string_view text);
/// CUDA's integer version (CUDART_VERSION, cudaRuntimeGetVersion, cuDriverGetVersion:
/// major * 1000 + minor * 10), decoded: 12080 -> {12, 8}.
struct CudaVersion {
  int64_t major = 0;
  int64_t minor = 0;
};
CudaVersion DecodeCudaVersion(int64_t encoded);
/// "12.8" for 12080.
std::string CudaVersionString(int64_t encoded);
/// /usr/local/cuda*/version.json: component key -> version ("cuda" -> "12.1.1",
/// "cuda_cudart" -> "12.1.105").
util::Expected<std::map<std::string, std::string>> ParseCudaVersionJson(std::string_view json);
/// version.txt: "CUDA Version 10.2.89" -> "10.2.89".
std::optional<std::string> ParseCudaVersionTxt(std::string_view text);

/// Top-level literal assignments of a Python file (`name = 'x'`, `name: str = "x"`,
/// `name = None|True|False|123`, lists of strings joined with ','), plus the pairs of a TF2
/// `build_info = collections.OrderedDict([('key', value), ...])` or dict literal.
BuildFacts ParsePythonLiterals(std::string_view text);
/// cupy/.data/_wheel.json: top-level strings, and "x.version" for objects with a version.
util::Expected<BuildFacts> ParseCupyWheelJson(std::string_view json);
/// os-release: KEY=value lines, shell quoting removed.
std::map<std::string, std::string> ParseOsRelease(std::string_view text);

}  // namespace imgcheck::catalog

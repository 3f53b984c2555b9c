// What is in the image: every CUDA library, driver file, package and framework build, each
// with its versions and where each version came from, plus the image's loader configuration.
// Built from the merged tree's captured bytes; never prints, never throws for bad content.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "catalog/ld_so.h"
#include "elf/elf.h"
#include "image/capture.h"
#include "image/image.h"
#include "util/error.h"
#include "util/limits.h"

namespace imgcheck::catalog {

enum class ComponentKind : uint8_t {
  kCudaLibrary,    ///< cuDNN, cudart, cuBLAS, ... (a family in rules/libraries.json)
  kDriverLibrary,  ///< user-mode driver library (libcuda.so.535.104.05, libnvidia-ml, ...)
  kDriverStub,     ///< toolkit link stub (.../stubs/libcuda.so): must never be loaded at run time
  kCompatLibrary,  ///< CUDA forward-compatibility driver (cuda-compat, .../compat/libcuda.so.X)
  kCudaToolkit,    ///< a toolkit install described by version.json / version.txt
  kHeader,         ///< a version header (cudnn_version.h, cuda_runtime_api.h)
  kPythonDist,     ///< a *.dist-info or *.egg-info distribution
  kFramework,      ///< a framework's build facts file (torch/version.py, TF build_info.py, ...)
  kOsPackage,      ///< a dpkg package
  kCondaPackage,   ///< a conda-meta/*.json package
};
/// "cuda-library", "driver-library", "driver-stub", "compat-library", "cuda-toolkit", "header",
/// "python-dist", "framework", "os-package", "conda-package".
std::string_view KindName(ComponentKind kind);
/// Inverse of KindName; nullopt for any other text.
std::optional<ComponentKind> ParseKind(std::string_view name);

enum class VersionSource : uint8_t {
  kFilename,     ///< libcudnn.so.8.9.2
  kSoname,       ///< DT_SONAME major (libcudnn.so.9 -> 9)
  kDpkg,         ///< owning dpkg package (status + info/*.list)
  kPipRecord,    ///< owning pip distribution (RECORD lists the file)
  kPipMetadata,  ///< a distribution's own METADATA / PKG-INFO Version
  kConda,        ///< owning conda package (conda-meta/*.json "files")
  kHeader,       ///< #define in a header (CUDNN_MAJOR/MINOR/PATCHLEVEL, CUDART_VERSION)
  kVersionJson,  ///< /usr/local/cuda*/version.json or version.txt
  kBuildInfo,    ///< framework build file (torch/version.py, build_info.py, ...)
  kEnv,          ///< image configuration Env (CUDA_VERSION, NV_CUDNN_VERSION, ...)
};
/// "filename", "soname", "dpkg", "pip-record", "pip-metadata", "conda", "header",
/// "version.json", "build-info", "env".
std::string_view SourceName(VersionSource source);

/// One statement of a version, and exactly where it was read.
struct VersionEvidence {
  std::string value;  ///< normalised upstream version ("8.9.2.26"); dpkg epoch/revision cut
  VersionSource source = VersionSource::kFilename;
  std::string path;    ///< the file that says so (the library itself for filename/soname)
  int layer = -1;      ///< layer that wrote `path`; -1 for image configuration
  std::string detail;  ///< raw form when it differs ("8.9.2.26-1+cuda12.1", "CUDNN_MAJOR")
};

enum class PackageManager : uint8_t { kDpkg, kPip, kConda };
/// "dpkg", "pip", "conda".
std::string_view ManagerName(PackageManager manager);

/// The package that owns a file.
struct PackageRef {
  PackageManager manager = PackageManager::kDpkg;
  std::string name;      ///< "libcudnn8", "nvidia-cudnn-cu12", "cudnn"
  std::string version;   ///< as the package manager states it
  std::string metadata;  ///< the metadata file (dpkg info/*.list, dist-info RECORD, conda json)
  int layer = -1;        ///< layer that wrote `metadata`
};

/// Key facts of a library's ELF headers (the whole ElfInfo is Catalog::Elf(path)).
struct LibraryFacts {
  std::string soname;
  std::vector<std::string> needed;
  uint16_t machine = 0;
  bool is64 = true;
  std::vector<unsigned> sass_sm;  ///< architectures with cubins in .nv_fatbin, sorted unique
  std::vector<unsigned> ptx_sm;   ///< architectures with PTX, sorted unique
};

/// Framework build facts, keys as the framework names them when it has one:
///   torch (torch/version.py): "__version__", "cuda", "cudnn" (rare), "git_version", "hip"
///   tensorflow (build_info.py, TF2 build_info dict or TF1 module vars): "cuda_version",
///     "cudnn_version", "cuda_compute_capabilities" (comma-joined, as listed: "sm_35,compute_80"),
///     "is_cuda_build"
///   jax / jaxlib / jax CUDA plugins: "__version__", "cuda_version" when stated
///   onnxruntime (build_and_package_info.py): "package_name", "__version__", "cuda_version",
///     "cudnn_version"
///   cupy (.data/_wheel.json): "cuda" ... whatever the JSON's top-level string values are
using BuildFacts = std::map<std::string, std::string, std::less<>>;

/// A `Requires-Dist:` line of a Python distribution.
struct Requirement {
  std::string name;       ///< normalised (PEP 503: lowercase, runs of -_. -> '-')
  std::string specifier;  ///< "==8.9.2.26", ">=2,<3", empty for any
  std::string marker;     ///< text after ';', trimmed, empty when none
  /// The extras it asks of `name` ("cuda-toolkit[cublas,cudart]": cublas, cudart), normalised.
  std::vector<std::string> extras;
  /// The extras its marker names (`extra == "cublas"`): it holds only when the distribution
  /// was installed with one of them (PEP 508). Empty: it always holds.
  std::vector<std::string> under_extras;
  std::string raw;  ///< the line's value as written
  /// The pinned version when the specifier is exactly "==V" (or "===V"), else empty.
  std::string Pinned() const;
};

/// A file that is not what its package installed: its size differs from the pip RECORD's, or
/// its MD5 from dpkg's info/<package>.md5sums (checked for the libraries whose digest the capture
/// policy computes, written by a later layer than the md5sums).
struct ReplacedFile {
  std::string path;
  PackageRef package;         ///< the installer; `metadata` is its RECORD or md5sums
  std::string stated, found;  ///< what the package states and what the file has ("512 bytes")
  int layer = -1;             ///< the layer that wrote the file now in the image
};

/// True for the kinds that are shared libraries of the CUDA stack: CUDA libraries, the driver,
/// its stubs and the forward-compatibility driver.
bool IsLibraryKind(ComponentKind kind);

struct Component {
  ComponentKind kind = ComponentKind::kCudaLibrary;
  /// Library base name ("libcudnn", "libcudnn_ops", "libcuda"), package or distribution name
  /// ("libcudnn8", "nvidia-cudnn-cu12", "torch"), framework ("torch", "tensorflow", "jaxlib").
  std::string name;
  /// Library family from rules/libraries.json ("cudnn", "cublas", "driver", ...); for packages,
  /// the family whose package patterns matched; empty when none.
  std::string family;
  std::string version;                    ///< the most precise known; empty when unknown
  std::vector<VersionEvidence> versions;  ///< every source, most trusted first
  /// Libraries: the regular file; dists: the *.dist-info / *.egg-info dir; dpkg packages:
  /// the status file; frameworks / headers / toolkits / conda: the file parsed.
  std::string path;
  int layer = -1;                       ///< layer that wrote `path` (the deleting layer if deleted)
  std::vector<int> overwritten_layers;  ///< earlier layers whose copy of `path` this one hides
  bool deleted = false;                 ///< removed by a whiteout in `layer`: not in the image
  std::vector<std::string> aliases;     ///< symlinks in the image that resolve to `path`
  /// Libraries: lower-case hex SHA-256 of the file when the reading took it (CapturePolicy's
  /// sbom_hashes), else empty.
  std::string sha256;
  /// Libraries: the package owning `path`; nullopt = unmanaged. Frameworks: the pip dist.
  std::optional<PackageRef> owner;
  std::optional<LibraryFacts> elf;  ///< libraries whose ELF headers were read

  // Python distributions.
  std::vector<Requirement> requires_dist;
  std::vector<std::string> missing_files;  ///< RECORD entries absent from the merged tree
  // dpkg packages: "install ok installed", "hold ok installed", ...
  std::string status;
  bool held = false;
  // Frameworks (and cuda-toolkit: component -> version from version.json).
  BuildFacts build;
};

/// What the image's configuration and /etc say about how libraries are found.
struct ImageConfig {
  std::vector<std::pair<std::string, std::string>> env;  ///< config Env, in order
  std::map<std::string, std::string> labels;
  LdSoConf ld_so_conf;                     ///< /etc/ld.so.conf and its includes (empty if absent)
  std::optional<LdCacheFile> ld_so_cache;  ///< /etc/ld.so.cache; nullopt when absent or corrupt
  std::string ld_so_cache_path;            ///< "/etc/ld.so.cache" when present
  int ld_so_cache_layer = -1;
  std::map<std::string, std::string> os_release;  ///< ID, VERSION_ID, PRETTY_NAME, ...
  std::string os_release_path;
  int os_release_layer = -1;

  /// The value of Env `key`, nullopt when unset (last assignment wins, as in a container).
  std::optional<std::string> Env(std::string_view key) const;
  /// LD_LIBRARY_PATH split on ':' with empty elements kept (they mean the working directory);
  /// empty vector when unset.
  std::vector<std::string> LdLibraryPath() const;
};

class Catalog {
 public:
  std::vector<Component> components;
  ImageConfig config;
  std::vector<image::Layer> layers;           ///< copied from the image: digest, created_by
  std::vector<util::Diagnostic> diagnostics;  ///< corrupt ELF / unreadable metadata, with place
  std::vector<ReplacedFile> replaced;         ///< package files overwritten after install
  /// The packages a package manager records as asked for, by "<manager>:<name>" ("dpkg:libcudnn8",
  /// "pip:torch", "conda:cudnn"; pip names normalised), each with its evidence: apt's manual mark
  /// (/var/lib/apt/extended_states), a RUN line that names it (`apt-get install`, `pip install`),
  /// pip's REQUESTED, conda's history specs.
  std::map<std::string, std::string, std::less<>> requested;
  /// The evidence that `package` was asked for; "" when none says so.
  std::string Requested(const PackageRef& package) const;
  /// The dpkg and conda packages that are not CUDA's (those are components): an SBOM of the
  /// whole image (catalog --sbom-scope all) lists them too. Every pip distribution is a component.
  std::vector<Component> packages;

  /// The parsed ELF headers of the regular file at exactly `path` in the merged tree (no
  /// link following); null when it is not an ELF file, was not captured, or is corrupt.
  const elf::ElfInfo* Elf(std::string_view path) const;
  /// Every ELF file of the merged tree, by path.
  const std::map<std::string, elf::ElfInfo, std::less<>>& elves() const { return elves_; }
  /// The package (dpkg, pip RECORD, conda) that owns the ELF file at `path`; null: unowned.
  const PackageRef* Owner(std::string_view path) const;
  /// The layer with this index, null when out of range.
  const image::Layer* Layer(int index) const;
  /// Components of `kind` (any name when `name` is empty), in catalog order.
  std::vector<const Component*> Find(ComponentKind kind, std::string_view name = {}) const;
  /// Present (not deleted) library components of `family` ("cudnn"), in catalog order.
  std::vector<const Component*> Family(std::string_view family) const;
  /// True when the image holds anything to check: a CUDA, driver, stub or compat library, a
  /// CUDA toolkit or a framework build (not deleted). False means "nothing to check", not
  /// "clean".
  bool HasCudaStack() const;

  // Building (used by Build and by tests).
  std::map<std::string, elf::ElfInfo, std::less<>>& mutable_elves() { return elves_; }
  std::map<std::string, PackageRef, std::less<>>& mutable_owners() { return owners_; }

 private:
  std::map<std::string, elf::ElfInfo, std::less<>> elves_;
  std::map<std::string, PackageRef, std::less<>> owners_;  // ELF files only
};

/// The top package directory of a framework: the component after site-packages/ or
/// dist-packages/ ("/usr/lib/python3/dist-packages/torch"), else the build file's directory.
std::string FrameworkPackageDir(const Component& fw);

/// "flash-attn 2.5.8" (pip), "dpkg libfoo 1.0", "conda cupy 13.0", or "unowned in <dir>": the
/// package that owns the ELF file at `path`.
std::string PackageLabel(const Catalog& catalog, std::string_view path);

struct LibraryRules;

/// What Build needs captured: the ELF capturer for likely shared objects and executables, and
/// a bounded prefix of the metadata files it parses (some named by `rules`, which the policy
/// copies). With `sbom_hashes`, also the SHA-256 of each family library outside a Python
/// environment (Component::sha256), hashed as it streams: a pass over those bytes that only an
/// SBOM needs (issue #26 keeps the plain scan near the inflate floor). Thread-safe; cheap per call.
image::CapturePolicy CapturePolicy(const LibraryRules& rules, bool sbom_hashes = false);
/// Identity of CapturePolicy(rules, sbom_hashes) for the layer cache (LoadOptions::capture_id):
/// changes whenever what the policy keeps changes, with the code or with the rule data.
std::string CapturePolicyId(const LibraryRules& rules, bool sbom_hashes = false);
/// Whose MD5 the readings take (LoadOptions::digests): a family library outside a Python
/// environment (pip's are checked by their RECORD's size) that a lower layer's dpkg md5sums
/// states, for IC015. Thread-safe.
image::DigestRule DigestRule(const LibraryRules& rules);

/// Catalogues the merged tree of `image`, classified by `rules` (rules/libraries.json).
/// Problems inside the image become diagnostics. A file that would make the catalog exceed
/// `limits` (metadata_bytes, elf_table_bytes, include_depth, include_files) stops the run:
/// util::LimitExceeded. `jobs` threads parse the ELF files.
Catalog Build(const image::Image& image, const LibraryRules& rules, const util::Limits& limits = {},
              int jobs = 1);

}  // namespace imgcheck::catalog

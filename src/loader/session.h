// The link maps of one image, built once: which ELF files are consumers (the roots worth
// loading), what their packages preload, each consumer's link map, and the link maps of the
// processes they run in. The checks only read a Session; scan::Run builds it.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "catalog/library_rules.h"
#include "image/image.h"
#include "loader/loader.h"
#include "util/error.h"

namespace imgcheck::loader {

/// One root the loader was run for, and its link map.
struct Consumer {
  std::string path;  ///< real path in the image
  std::string role;  ///< "framework torch", "cuda-library cudnn", "executable", "library"
  LoadGraph graph;
  std::string package;  ///< its owner: "flash-attn 2.5.8", "dpkg libfoo 1.0", "unowned in /app"
  /// Non-empty when the root cannot run as shipped: its first own non-CUDA dependency that
  /// does not resolve either ("libtorch.so"). Such a consumer is no gate for CUDA checks.
  std::string not_runnable;
  /// Non-empty when its package loads it only on request (dlopen.json optional): "onnxruntime-gpu
  /// loads it when the TensorrtExecutionProvider is requested". Its CUDA gaps are info.
  std::string optional;
  /// True when its root is a Python extension module (ImportsAsModule) and the link map finds
  /// a libc (FindsLibc): importing it fails on any DT_NEEDED of its link map that does not
  /// resolve, whatever library that names (info only where `optional` says when it loads).
  bool imported = false;
  /// True when its root loads libraries on its first call (dlopen.json on_call): those dlopens
  /// are the package's own evidence, checked whatever library they name.
  bool on_call = false;
  /// With on_call, for a row whose loads the package cannot do without (OnCallRow::fails):
  /// what fails, and the row's fix. `optional` stays empty: their gaps are errors.
  std::string on_call_fails, on_call_fix;
  /// The framework process it runs in and the evidence that places it there ("torch's process:
  /// _C.so NEEDS libc10.so, which only torch's objects provide"); "" for a process of its own.
  std::string process;
  std::string framework;  ///< that framework's pip distribution ("torch"); "" when none
  /// With `optional`: where the system libraries its feature needs come from (OptionalRow's
  /// system); "" when the data does not say.
  std::string optional_system;
  /// A file of another release than the installed one selects (OptionalRow::select): its
  /// package never loads it, so its symbols, built for that other release, are not bound.
  bool unselected = false;
};

/// One entry of LD_PRELOAD (the image's Env) or /etc/ld.so.preload: every process of the image
/// maps it first, or prints "ERROR: ld.so: object ... cannot be preloaded ...: ignored." and
/// runs without it.
struct PreloadEntry {
  std::string
      entry;  ///< as written ("libjemalloc.so.2", "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4")
  std::string from;       ///< "LD_PRELOAD" or "/etc/ld.so.preload"
  int layer = -1;         ///< the layer that wrote /etc/ld.so.preload; -1 for the Env
  Resolution resolution;  ///< as ld.so searches it for the main program (no RPATH of its own)
};

/// An object no evidence places in a process and that cannot load on its own: a DT_NEEDED
/// names a library only another package's directory holds, and nothing says who loads it.
struct Unplaced {
  std::string path;
  std::string package;  ///< PackageLabel of its owner
  std::string missing;  ///< the DT_NEEDED that does not resolve
};

/// Whether `path` (its ELF facts `elf`) is a Python extension module that an import loads: under
/// site-packages or dist-packages, a `.so` whose name is a module name (CPython's
/// EXTENSION_SUFFIXES: `<name>.cpython-3XY-<platform>.so`, `<name>.abi3.so`, `<name>.so`), not a
/// `lib*.so*` library unless it defines the module's PyInit_<name> (paddle's libpaddle.so).
bool ImportsAsModule(std::string_view path, const elf::ElfInfo& elf);

/// Whether some object of `graph` found libc.so: then a name that does not resolve is missing
/// from the image, not provided by a runtime the scan was not given (a directory of wheels).
bool FindsLibc(const LoadGraph& graph);

/// Libraries a Python package loads itself before its extension modules import (dlopen.json's
/// preload table), or that `import <package>` loads (its imports table): the first file
/// matching each of `files`, searched in `dirs` in order.
struct PreloadRow {
  std::string package;             ///< glob on the owning pip distribution ("cupy-cuda1*x")
  std::vector<std::string> files;  ///< globs on file names, in the order they are loaded
  std::vector<std::string> dirs;   ///< globs relative to the package's site-packages directory
  /// Optional: the package preloads only when loading this file (relative to site-packages)
  /// fails on a library of `files` (PyTorch's libtorch_global_deps.so); empty: always.
  std::string unless_loads;
  std::string source;
  /// RTLD_GLOBAL (ctypes.CDLL with mode=RTLD_GLOBAL): what it loads joins the global scope.
  /// False: RTLD_LOCAL (an extension module's import, ctypes.CDLL's default): later loads find
  /// its objects by name, but bind to them only through their own dependencies.
  bool global = true;
  /// imports rows: globs on the distributions whose own `__init__` imports this package first
  /// even where their METADATA does not require it (torchaudio 2.11 has no Requires-Dist).
  std::vector<std::string> imported_by;
};

/// Files a package loads only on request (dlopen.json's optional table).
struct OptionalRow {
  std::string package;             ///< glob on the owning pip distribution
  std::vector<std::string> files;  ///< globs on paths relative to site-packages
  std::string when;                ///< "the TensorrtExecutionProvider is requested"
  std::string source;
  /// Optional: the package loads the one file of `files` that also matches `select` with
  /// "{major}" replaced by the major release of the installed distribution `major_of`
  /// (nccl-extensions: "nccl/*/lib/cu{major}/*" of cuda-bindings); that file is no optional
  /// one, the others are never loaded.
  std::string select, major_of;
  /// What the package loads by full path before a module of `files` (torchaudio's _init_sox:
  /// torch.ops.load_library of lib/libtorchaudio_sox.so, then `import _torchaudio_sox`): globs
  /// relative to site-packages; a '*' in `library` is what the module's one '*' matched. The
  /// module's DT_NEEDED of that name then finds it loaded.
  struct LoadsFirst {
    std::string module, library;
  };
  std::vector<LoadsFirst> loads_first = {};
  /// Where the system libraries it needs come from ("apt-get install libsox-dev"): the fix when
  /// the image lacks them; "" when the data does not say.
  std::string system = {};
};

/// Libraries a package's module loads through cuda-pathfinder on its first call (dlopen.json's
/// on_call table): no ELF file names them, and the import succeeds without them.
struct OnCallRow {
  std::string package;             ///< glob on the owning pip distribution ("cuda-bindings")
  std::string module;              ///< glob on the module's path relative to site-packages
  std::vector<std::string> names;  ///< the sonames pathfinder tries; "{major}": the dist's
  std::vector<std::string> dirs;   ///< globs relative to site-packages, searched first
  std::string when;                ///< "an NVRTC function is first called"
  std::string source;
  /// What the package cannot do when these loads fail, where that is its purpose (numba-cuda
  /// compiles no kernel): their gaps are errors, not info. "" when they matter only on use.
  std::string fails = {};
  std::string fix = {};  ///< with `fails`: the remediation ("pip install 'numba-cuda[cu12]'")
  /// Directories under a CUDA toolkit's root searched when the system search misses every
  /// name ("nvvm/lib64"): the root in $CUDA_PATH or $CUDA_HOME, then that of the first `canary`
  /// the system search finds (cuda-pathfinder's CTK-root canary, libcudart). Empty: neither.
  std::vector<std::string> ctk_dirs = {};
  std::vector<std::string> canary = {};
  /// [distribution, glob on its major]: the row applies only with that one installed
  /// (["cuda-bindings", "13"]: its runtime module loads libcudart, 12.x links it statically).
  std::vector<std::string> with = {};
};

/// The data from rules/ that decides the consumers and how they load (rules::SessionRules
/// fills it from the knowledge). The tables must outlive Session::Build.
struct ConsumerRules {
  const catalog::LibraryRules* libraries = nullptr;
  const std::vector<PreloadRow>* preload = nullptr;
  const std::vector<OptionalRow>* optional = nullptr;
  /// Modules that load libraries on their first call: each is a consumer whose link map holds
  /// those loads, and what they cannot resolve is info that says when it matters.
  const std::vector<OnCallRow>* on_call = nullptr;
  /// What `import <package>` loads after the package's preloads (dlopen.json's imports table):
  /// in the process of every distribution whose Requires-Dist names the package, recursively,
  /// before that distribution's own modules.
  const std::vector<PreloadRow>* imports = nullptr;
  /// The dlopen rules for the objects of this framework (its build facts and release; null: outside
  /// a framework).
  std::function<std::vector<DlopenRule>(const catalog::Component* framework)> dlopen;
};

/// Loader options for the image: its Env's LD_LIBRARY_PATH, WorkingDir, ld.so.cache, the
/// platform of its glibc (ImagePlatform), and `dlopen`. The error of an image whose machine the
/// loader does not model.
util::Expected<Options> ImageOptions(const image::Image& image, const catalog::Catalog& catalog,
                                     std::vector<DlopenRule> dlopen);

/// The link maps of one image. Built once (Build or ForRoots); afterwards only read.
class Session {
 public:
  /// No link maps: the loader does not model the image, or the scan stops before them.
  Session() = default;

  /// The consumers worth loading (at most `limit`): every ELF under a framework's package
  /// directory, every CUDA library of the catalog, then every other executable or shared object
  /// whose DT_NEEDED names a library that `rules.libraries` classifies (a CUDA family or the
  /// driver), then every Python extension module of a distribution placed in the process of a
  /// package of the imports table, and every other shared object placed there. The evidence
  /// that places a distribution, strongest first: its objects NEED a library only that
  /// framework's objects provide (libc10.so, libtensorflow_framework.so.2), whatever its
  /// METADATA says; it requires the framework (Requires-Dist, recursively); an imports row's
  /// imported_by names it. A consumer runs in the process its placement implies: for each
  /// framework and distribution it requires, dependencies first, what that one preloads and its
  /// import loads; then what its own package preloads. Every
  /// consumer's link map draws on one budget of options.limits.loader_work. Also the link map of
  /// each Python interpreter a consumer runs in (InterpreterOf).
  static Session Build(const image::Image& image, const catalog::Catalog& catalog,
                       const ConsumerRules& rules, Options options, size_t limit = 2000);
  /// The link maps of exactly `roots` (real paths of ELF files), in order, with `options` as
  /// given (why --consumer).
  static Session ForRoots(const image::Image& image, const catalog::Catalog& catalog,
                          const std::vector<std::string>& roots, Options options);

  /// The options every link map of the image was built with (a consumer's dlopen rules and
  /// preloads are its own).
  const Options& options() const { return options_; }
  /// Every consumer, in the order they were chosen.
  const std::vector<Consumer>& consumers() const { return consumers_; }
  /// The Python extension modules no evidence placed and that cannot load on their own (at
  /// most kMaxUnplaced are looked at): never checked, so the report says so in one note.
  const std::vector<Unplaced>& unplaced() const { return unplaced_; }
  /// The entries of LD_PRELOAD and /etc/ld.so.preload, in glibc's order (the variable first);
  /// each that resolves is also a consumer of its own (role "preload").
  const std::vector<PreloadEntry>& preloads() const { return preloads_; }
  static constexpr size_t kMaxUnplaced = 256;

  /// Where a consumer runs, for symbol binding: `python` when its root is a Python extension
  /// module (under site-packages or dist-packages); then `interpreter` is the link map (no
  /// dlopen rules, no preloads) of the image's interpreter of its Python version (the first one
  /// when the module does not say which), null when the image has none.
  struct Process {
    bool python = false;
    const LoadGraph* interpreter = nullptr;
  };
  Process InterpreterOf(const Consumer& consumer) const;

  /// Resolves `name` as requested by object `object` of `consumer`'s link map, with options():
  /// a lookup the link map did not make (loader::Resolve).
  Resolution Resolve(const Consumer& consumer, int object, std::string_view name, Kind kind) const;

 private:
  const image::Tree* tree_ = nullptr;
  const catalog::Catalog* catalog_ = nullptr;
  Options options_;
  std::vector<Consumer> consumers_;
  std::vector<Unplaced> unplaced_;
  std::vector<PreloadEntry> preloads_;
  std::map<std::string, std::string> interpreters_;  ///< "python3.11" -> its real path
  std::map<std::string, LoadGraph, std::less<>> interpreter_maps_;  ///< by real path
};

}  // namespace imgcheck::loader

// The glibc dynamic loader, simulated over an image's merged tree: which file ld.so would map
// for each DT_NEEDED entry and each dlopen by name, and why (glibc elf/dl-load.c,
// _dl_map_object and open_path; x86-64 and aarch64).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "catalog/catalog.h"
#include "catalog/ld_so.h"
#include "elf/abi.h"
#include "elf/elf.h"
#include "image/tree.h"
#include "util/error.h"
#include "util/limits.h"

namespace imgcheck::loader {

/// ELF facts of the regular file at exactly `real_path` (no link following); null when the file
/// is not an ELF file. The loader never reads files itself: the catalog's ELF index answers.
using ElfLookup = std::function<const elf::ElfInfo*(std::string_view real_path)>;

enum class Kind : uint8_t { kNeeded, kDlopen };

/// The phase of the search that produced a candidate, in glibc's order.
enum class Reason : uint8_t {
  kAlreadyLoaded,  ///< an object in the link map already has this name, soname, or file
  kDirectPath,     ///< the name contains '/': used as a path (relative: to the working dir)
  kRpath,          ///< DT_RPATH of the consumer, of its loaders, or of the main program
  kLdLibraryPath,  ///< LD_LIBRARY_PATH from the image Env
  kRunpath,        ///< DT_RUNPATH of the consumer (never inherited)
  kLdCache,        ///< the image's /etc/ld.so.cache
  kDefaultDir,     ///< the loader's built-in system directories
};
/// "already-loaded", "direct-path", "rpath", "ld-library-path", "runpath", "ld.so.cache",
/// "default-dir".
std::string_view ReasonName(Reason reason);

/// What happened to one candidate file.
enum class Outcome : uint8_t {
  kMissing,       ///< no such file (or a directory, a dangling link, a symlink loop)
  kWrongClass,    ///< ELF of the other class (32/64-bit): skipped, search goes on
  kWrongMachine,  ///< ELF for another e_machine: skipped, search goes on
  kNotElf,        ///< exists but is not ELF: ld.so stops with "invalid ELF header"
  kRejected,      ///< ld.so.cache entry in a system dir while the consumer has NODEFLIB
  kFound,
};
/// "missing", "wrong-class", "wrong-machine", "not-elf", "rejected-nodeflib", "found".
std::string_view OutcomeName(Outcome outcome);

/// One place the search looked.
struct Attempt {
  Reason phase = Reason::kDefaultDir;
  std::string entry;  ///< the search entry as written ("$ORIGIN/../lib", "", "/etc/ld.so.cache")
  std::string path;   ///< the candidate file (entry expanded + glibc-hwcaps subdir + name)
  Outcome outcome = Outcome::kMissing;
};

enum class Status : uint8_t {
  kFound,
  kNotFound,  ///< every phase tried; `tried` lists them
  kError,     ///< ld.so stops here (a non-ELF candidate); `error` says why
};

/// How one name requested by one consumer resolves. The same name may resolve differently
/// for different consumers (each has its own RPATH/RUNPATH); every request is kept.
struct Resolution {
  std::string consumer;  ///< real path of the object whose DT_NEEDED (or dlopen) names it
  std::string name;      ///< as requested
  Kind kind = Kind::kNeeded;
  Status status = Status::kNotFound;
  Reason reason = Reason::kDefaultDir;  ///< kFound only
  std::string path;            ///< path as ld.so opens it (search dir + name), before symlinks
  std::string real_path;       ///< after following symlinks inside the image
  std::string entry;           ///< search entry that matched, unexpanded ("$ORIGIN/../lib")
  std::string rpath_owner;     ///< kRpath: real path of the object whose DT_RPATH matched
  std::vector<Attempt> tried;  ///< every candidate looked at, in order, the hit last
  std::string error;           ///< kError: ld.so's message

  bool found() const { return status == Status::kFound; }
};

/// One object of the link map.
struct LoadedObject {
  std::string path;                   ///< as ld.so opened it (l_name)
  std::string real_path;              ///< after symlinks; the key for ElfLookup
  const elf::ElfInfo* elf = nullptr;  ///< never null for loaded objects
  std::vector<std::string> names;     ///< names it was requested by, first first
  int loader = -1;  ///< index of the object that first requested it (l_loader); -1: root
  Kind loaded_by = Kind::kNeeded;       ///< how that first request was made
  std::vector<Resolution> resolutions;  ///< its DT_NEEDED in order, then its dlopens
  std::string preloaded_by;  ///< Options::preload's reason when it was preloaded, else empty
  /// Preloaded with RTLD_LOCAL: what its load mapped stays out of the global scope.
  bool preloaded_local = false;
};

/// A library in the process before the root loads: a package's own preloading (PyTorch's
/// nvidia-wheel preload, CuPy's cuda-pathfinder, ...). Later DT_NEEDED and dlopen lookups of
/// its soname find it already loaded, as glibc does.
struct Preload {
  std::string real_path;
  std::string why;     ///< "preloaded by cupy from /.../nvidia/cu13/lib"
  bool global = true;  ///< RTLD_GLOBAL; false: RTLD_LOCAL (an extension module's import)
};

/// The link map of one root consumer.
struct LoadGraph {
  /// In load order: [0] the root, then breadth-first like _dl_map_object_deps, then objects
  /// dlopened by name (each followed by its own dependencies). The interpreter (the root's
  /// PT_INTERP, else Platform::interpreter), when the image has it, is [1]: ld.so maps itself
  /// first, and answers to its path and soname.
  std::vector<LoadedObject> objects;

  /// Every resolution of every object, in load order.
  std::vector<const Resolution*> Resolutions() const;
  /// Index of the object with this real path, -1 when not loaded.
  int Find(std::string_view real_path) const;
  /// $ORIGIN of objects[i], as ExpandDynamicTokens takes it: for the root, the directory of its
  /// real path (the kernel's resolved executable path, glibc _dl_get_origin); for every other
  /// object, the directory of the path it was opened by, symlinks not followed (glibc
  /// _dl_new_object sets l_origin from the name open_path or the cache gave, never realpath).
  std::string Origin(int i) const;
};

/// One library an object loads with dlopen: the names it tries, in order; the first that loads
/// wins (cuDNN 9 tries libcudnn_graph.so.9.1.0, then .so.9.1, then .so.9). A name may hold
/// {version:N}, the caller's own release cut to N components (Options::version_of).
struct DlopenCall {
  std::vector<std::string> names;
  DlopenCall(std::string name) : names{std::move(name)} {}  // NOLINT(google-explicit-constructor)
  DlopenCall(const char* name) : names{name} {}             // NOLINT(google-explicit-constructor)
  explicit DlopenCall(std::vector<std::string> tries) : names(std::move(tries)) {}
};

/// Which libraries an object opens with dlopen (data from rules/dlopen.json).
struct DlopenRule {
  std::string caller;             ///< glob on the caller's soname or file name ("libcudnn.so.9*")
  std::vector<DlopenCall> calls;  ///< in order
  std::string source;             ///< where this fact comes from
  /// Non-zero: only for the objects of a framework built with this CUDA major (its build facts'
  /// cuda_version); the rules stage drops the rule elsewhere.
  int cuda_major = 0;
  /// Non-empty: only for the objects of a framework release below this one ("2": TensorFlow
  /// 1.x); the rules stage drops the rule elsewhere.
  std::string framework_before{};
};

/// The loader build's platform: values glibc fixes at build time or takes from the CPU. The
/// defaults are upstream glibc's on x86-64 (elf::kX8664); an image's come from DetectPlatform.
struct Platform {
  uint16_t machine = elf::kX8664.machine;  ///< candidates must match it
  bool is64 = elf::kX8664.is64;
  /// $PLATFORM: the kernel's AT_PLATFORM. glibc makes it "haswell" or "xeon_phi" on Intel
  /// CPUs with those features; the host CPU is unknown, so not here.
  std::string platform{elf::kX8664.platform};
  std::string lib = "lib64";  ///< $LIB (Debian/Ubuntu: "lib/x86_64-linux-gnu")
  /// System search directories in order (upstream x86-64: /lib64, /usr/lib64; Debian/Ubuntu:
  /// /lib/<triplet>, /usr/lib/<triplet>, /lib, /usr/lib).
  std::vector<std::string> default_dirs = {"/lib64", "/usr/lib64"};
  /// glibc-hwcaps subdirectories searched under every search directory, before it, in
  /// priority order. Policy: the host CPU is unknown, so it is the ABI's baseline
  /// (elf::Abi::hwcaps); none for glibc < 2.33. Legacy hwcaps directories (tls/, x86_64/;
  /// gone in glibc 2.37) are not searched.
  std::vector<std::string> hwcaps = {std::string(elf::kX8664.hwcaps)};
  std::string interpreter{elf::kX8664.interpreter};  ///< PT_INTERP when the root has none
};

/// `entry` (a DT_RPATH/DT_RUNPATH/LD_LIBRARY_PATH element or a DT_NEEDED with a '/') with its
/// dynamic string tokens expanded as glibc's _dl_dst_substitute does: $ORIGIN (`origin`, the
/// directory of the object), $PLATFORM and $LIB of `platform`, each also as ${NAME}. A token
/// must not run on into identifier characters ($ORIGINX stays); unknown tokens stay as written.
/// The one expansion of these tokens: the loader's search and every check use it.
std::string ExpandDynamicTokens(std::string_view entry, std::string_view origin,
                                const Platform& platform);

/// The platform of a glibc in `tree` for objects of `machine`/class: Debian/Ubuntu multiarch
/// layout when the tree has /lib/<triplet>/libc.so.6 (or /usr/lib/<triplet>/), else upstream.
Platform DetectPlatform(const image::Tree& tree, uint16_t machine, bool is64);

/// The platform of the image: the machine and class of its libc.so.6 (in the modelled ABIs'
/// multiarch directories, /lib64, /usr/lib64, /lib, /usr/lib) or, without one, of the program
/// interpreter its executables name (musl, other ABIs); with neither, of `architecture` (the
/// image configuration's). An error (one line, for a diagnostic) when that machine is not one
/// of elf::kAbis: the loader cannot simulate it.
util::Expected<Platform> ImagePlatform(const image::Tree& tree, const catalog::Catalog& catalog,
                                       std::string_view architecture);

/// What the link maps built with one Options (and its copies) may still do together: objects
/// mapped and candidate files tried. util::LimitExceeded once it is spent.
struct Budget {
  uint64_t left = 0;
};

/// Tree::Resolve's answers for the candidate files the loader tried, by path, for one tree. The
/// link maps of an image try the same files over and over (every consumer's search for a name
/// it lacks walks the same directories and their glibc-hwcaps subdirectories), and resolving a
/// path walks it component by component.
class ResolvedPaths {
 public:
  explicit ResolvedPaths(const image::Tree& tree) : tree_(&tree) {}
  const image::Tree& tree() const { return *tree_; }
  /// tree().Resolve(path); the reference stays valid as long as this object.
  const std::optional<image::Tree::Resolved>& Resolve(const std::string& path);

 private:
  const image::Tree* tree_;
  std::unordered_map<std::string, std::optional<image::Tree::Resolved>> paths_;
};

struct Options {
  Platform platform;
  /// LD_LIBRARY_PATH from the image Env; nullopt when unset. Split on ':' and ';'; an empty
  /// element means the working directory.
  std::optional<std::string> ld_library_path;
  std::string working_dir = "/";  ///< image WorkingDir: relative names and empty elements
  const catalog::LdCacheFile* cache = nullptr;  ///< the image's ld.so.cache; null when absent
  std::vector<DlopenRule> dlopen;  ///< applied to every loaded object whose name matches
  std::vector<Preload> preload;    ///< mapped right after the root, before its dependencies
  /// The release of the object at a real path ("9.1.0.70"), for {version:N} in dlopen names;
  /// empty (or unset) when unknown: such names are then not tried.
  std::function<std::string(std::string_view real_path)> version_of;
  /// loader_objects bounds one link map, search_dirs one search list (util::LimitExceeded).
  util::Limits limits;
  /// Shared by every Load of one scan (Session::Build sets it); null: each Load and
  /// Resolve starts one of limits.loader_work.
  std::shared_ptr<Budget> budget;
  /// Shared by every Load and Resolve over one tree (Session::Build sets it); null, or one of
  /// another tree: each Load and Resolve keeps its own.
  std::shared_ptr<ResolvedPaths> resolved;
};

/// Resolves one name requested by `consumer` (index into `graph`) with ld.so's rules (a
/// DT_NEEDED entry or dlopen: both search the consumer's RPATH chain unless it has RUNPATH).
/// Does not add the result to the graph. util::LimitExceeded for a search list longer than
/// options.limits.search_dirs.
Resolution Resolve(const image::Tree& tree, const ElfLookup& elf, const LoadGraph& graph,
                   int consumer, std::string_view name, Kind kind, const Options& options);

/// Simulates loading `root` (a real path in the tree: an executable, or a library such as a
/// framework extension, which then plays the main program): its dependencies breadth-first,
/// then the dlopens `options.dlopen` names. Names that are not found are recorded, not fatal; of
/// a dlopen with several names, the one that loaded (or, when none did, the last, with what
/// every name tried).
/// Empty graph when `root` is not an ELF file. $ORIGIN of the root is the directory of its
/// real path (as exec gives it); of every other object, the directory of the path it was
/// opened by, symlinks not followed (glibc l_origin). util::LimitExceeded when the link map
/// would hold more than options.limits.loader_objects objects. Each object's search lists and
/// each name are looked up once per link map, so the work grows with the objects, not their
/// square.
LoadGraph Load(const image::Tree& tree, const ElfLookup& elf, std::string_view root,
               const Options& options);

}  // namespace imgcheck::loader

// Symbol binding over a link map, as glibc does it when an object is relocated with RTLD_NOW
// (elf/dl-lookup.c _dl_lookup_symbol_x, check_match; elf/dl-object.c _dl_new_object's scopes):
// each undefined, non-weak dynamic symbol of an object must be defined by an object of its
// lookup scope, with the version the reference names when it names one. Names are kept as
// 64-bit hashes (a framework library exports hundreds of thousands of symbols); only the
// references that fail keep their names.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loader/loader.h"

namespace imgcheck::loader {

struct BindScope;
struct Unbound;

/// What the objects of an image define and reference, by real path, hashed; built once per
/// object on first use and shared by every link map of a scan, with the outcome of each object
/// bound in each scope. Not thread-safe.
class SymbolIndex {
 public:
  explicit SymbolIndex(ElfLookup elf) : elf_(std::move(elf)) {}

  /// False when the object's symbol table could not be read whole (its answer means nothing):
  /// ElfInfo::symbols_unread or table_limit_reached says why.
  bool Known(std::string_view real_path);
  /// Hashes kept, definitions and references (memory: about 8 bytes each).
  size_t size() const { return hashes_; }

 private:
  friend std::vector<Unbound> Bind(const LoadGraph&, const BindScope&, SymbolIndex&);
  struct Exports {
    std::vector<uint64_t> keys;  ///< sorted
    /// A Bloom filter of `keys` (two bits a key, about 8 bits of filter a key): most lookups
    /// are of a reference in an object that does not define it (a scope is searched object by
    /// object), and they end here without a search.
    std::vector<uint64_t> filter;
    unsigned filter_shift = 64;  ///< 64 - log2(bits of `filter`)
    bool known = false;
    /// True when the object defines one of the keys (elf::AddExportKeys). An unversioned
    /// reference binds to any definition but a hidden (non-default, "@") version: key
    /// elf::SymbolNameHash. A versioned one to the same version, elf::VersionedKey(h, version),
    /// or to a definition without version (glibc accepts those for any version),
    /// elf::VersionedKey(h, "").
    bool Defines(uint64_t key, uint64_t alt) const;
    void BuildFilter();
    bool MayHold(uint64_t key) const;
  };
  struct Reference {
    uint64_t key = 0, alt = 0;
    uint32_t symbol = 0;  ///< index in ElfInfo::imported
  };
  const Exports& Get(std::string_view real_path);
  const std::vector<Reference>& References(std::string_view real_path);
  ElfLookup elf_;
  std::map<std::string, Exports, std::less<>> exports_;
  std::map<std::string, std::vector<Reference>, std::less<>> references_;
  /// (object, scope) fingerprint -> the indices into ElfInfo::imported that failed.
  std::unordered_map<uint64_t, std::vector<uint32_t>> bound_;
  size_t hashes_ = 0;
};

/// The process a link map's root is loaded into.
struct BindScope {
  /// Real paths of the objects of the global scope already in the process before the root
  /// was loaded: the Python interpreter and its dependencies for an extension module (loaded
  /// with dlopen, RTLD_NOW). Empty for a program (its link map is the global scope) and for a
  /// library whose host is unknown.
  std::vector<std::string> global;
  /// The host is a Python interpreter the image does not have: Py* and _Py* are taken as
  /// bound (the interpreter that imports the module provides them).
  bool python_symbols = false;
  /// Whether a library the image need not have is the host's (the driver the container runtime
  /// mounts). Its absence hides only the C names it may define: it exports no C++ symbol.
  std::function<bool(std::string_view soname)> from_host;
};

/// A reference no object of the scope defines.
struct Unbound {
  int object = -1;      ///< index in the graph of the object whose reference fails
  std::string name;     ///< the symbol as written (mangled for C++)
  std::string version;  ///< the version it requires, empty when none
  std::string from;     ///< for a versioned reference: the file its DT_VERNEED entry names
  uint64_t hash = 0;    ///< elf::NameHash of the name (all that is known when `name` is empty)
};

/// The references of `graph`'s objects that fail to bind. An object is bound in the scope of
/// the load that first mapped it: the global scope (BindScope::global, the root's own link map
/// for a program, libraries preloaded RTLD_GLOBAL and what they brought in, ld.so), then the
/// breadth-first dependencies of the object that load started from (the root, a preload, or the
/// library dlopened). Not reported, because another rule or nothing can judge them: weak
/// references; references of an object, or into a scope, whose symbol table was not read whole; a
/// versioned reference to a file that does not resolve, or whose version the file does not
/// define (glibc stops at the version check first); unversioned references of a scope in
/// which some DT_NEEDED does not resolve, unless that one is a glibc or GCC runtime library
/// (they version every symbol they export), or the host's (BindScope::from_host: then only its
/// C names go unjudged).
std::vector<Unbound> Bind(const LoadGraph& graph, const BindScope& scope, SymbolIndex& index);

}  // namespace imgcheck::loader

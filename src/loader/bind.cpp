#include "loader/bind.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

#include "util/path.h"

namespace imgcheck::loader {
namespace {

constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

uint64_t Mix(uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) h = (h ^ static_cast<uint64_t>(c)) * kFnvPrime;
  return h;
}

// Libraries that give every symbol they export a version (glibc's and GCC's runtimes, built
// with version scripts): an unversioned reference never binds to them, so their absence says
// nothing about unversioned references (images without a libc of their own: wheels alone).
bool VersionsEverything(std::string_view name) {
  static constexpr std::array<std::string_view, 14> kRuntime = {
      "libc.so.",     "libm.so.",      "libpthread.so.", "libdl.so.",    "librt.so.",
      "libutil.so.",  "libresolv.so.", "libanl.so.",     "libmvec.so.",  "libstdc++.so.",
      "libgcc_s.so.", "ld-linux",      "ld64.so.",       "libatomic.so."};
  return std::any_of(kRuntime.begin(), kRuntime.end(),
                     [&](std::string_view p) { return name.starts_with(p); });
}

// Names the C++ runtime (libstdc++, libgcc_s) defines: an object that does not link it itself
// references them unversioned (libtorch.so gets std:: from libtorch_cpu.so's libstdc++).
bool CxxRuntimeSymbol(std::string_view name) {
  static constexpr std::array<std::string_view, 27> kPrefixes = {"_ZNSt",
                                                                 "_ZNKSt",
                                                                 "_ZSt",
                                                                 "_ZNSs",
                                                                 "_ZNKSs",
                                                                 "_ZNSb",
                                                                 "_ZNKSb",
                                                                 "_ZNSi",
                                                                 "_ZNSo",
                                                                 "_ZNSd",
                                                                 "_ZNSa",
                                                                 "_ZTISt",
                                                                 "_ZTSSt",
                                                                 "_ZTVSt",
                                                                 "_ZTTSt",
                                                                 "_ZTINSt",
                                                                 "_ZTIN10__cxxabiv",
                                                                 "_ZTVN10__cxxabiv",
                                                                 "_Znw",
                                                                 "_Zna",
                                                                 "_Zdl",
                                                                 "_Zda",
                                                                 "__cxa_",
                                                                 "__gxx_",
                                                                 "_Unwind_",
                                                                 "_ITM_",
                                                                 "_ZGTt"};
  return std::any_of(kPrefixes.begin(), kPrefixes.end(),
                     [&](std::string_view p) { return name.starts_with(p); });
}

bool PythonSymbol(std::string_view name) {
  return name.starts_with("Py") || name.starts_with("_Py");
}

// Where `o` needs `version` from: the file its DT_VERNEED names, and whether that file resolved
// in `graph` to an object that defines the version (or defines none). Otherwise ld.so stops at
// the version check (IC012, IC013's version part) before binding a symbol of that version.
struct VersionFrom {
  std::string file;
  bool checked = false;
};
VersionFrom NeededFrom(const LoadGraph& graph, const LoadedObject& o, std::string_view version) {
  VersionFrom v;
  for (const elf::VersionNeed& need : o.elf->version_needs)
    if (std::find(need.versions.begin(), need.versions.end(), version) != need.versions.end())
      v.file = need.file;
  const Resolution* from = nullptr;
  for (const Resolution& r : o.resolutions)
    if (r.kind == Kind::kNeeded && r.name == v.file && r.found()) from = &r;
  if (!from) return v;
  int p = graph.Find(from->real_path);
  const elf::ElfInfo* provider = p >= 0 ? graph.objects[static_cast<size_t>(p)].elf : nullptr;
  v.checked = provider != nullptr &&
              (provider->version_definitions.empty() ||
               std::find(provider->version_definitions.begin(), provider->version_definitions.end(),
                         version) != provider->version_definitions.end());
  return v;
}

}  // namespace

const SymbolIndex::Exports& SymbolIndex::Get(std::string_view real_path) {
  auto it = exports_.find(real_path);
  if (it != exports_.end()) return it->second;
  Exports e;
  if (const elf::ElfInfo* info = elf_(real_path)) {
    e.known = info->symbols_unread.empty() && !info->table_limit_reached;
    e.keys = elf::ExportKeys(*info);
  }
  e.BuildFilter();
  hashes_ += e.keys.size();
  return exports_.emplace(std::string(real_path), std::move(e)).first->second;
}

namespace {

// The two bit positions of `key` in a filter of 2^(64 - shift) bits: the high bits of two
// multiplicative hashes (keys are FNV hashes, whose high bits mix poorly on their own).
std::pair<uint64_t, uint64_t> FilterBits(uint64_t key, unsigned shift) {
  return {(key * 0x9e3779b97f4a7c15ULL) >> shift, (key * 0xc2b2ae3d27d4eb4fULL) >> shift};
}

}  // namespace

void SymbolIndex::Exports::BuildFilter() {
  // 8 bits a key, a power of two: about 5 % of absent keys pass two probes.
  unsigned log2_bits = 6;
  while (log2_bits < 40 && (uint64_t{1} << log2_bits) < keys.size() * 8) ++log2_bits;
  filter.assign((uint64_t{1} << log2_bits) / 64, 0);
  filter_shift = 64 - log2_bits;
  for (uint64_t key : keys) {
    auto [a, b] = FilterBits(key, filter_shift);
    filter[a / 64] |= uint64_t{1} << (a % 64);
    filter[b / 64] |= uint64_t{1} << (b % 64);
  }
}

bool SymbolIndex::Exports::MayHold(uint64_t key) const {
  auto [a, b] = FilterBits(key, filter_shift);
  return (filter[a / 64] >> (a % 64) & 1) != 0 && (filter[b / 64] >> (b % 64) & 1) != 0;
}

bool SymbolIndex::Exports::Defines(uint64_t key, uint64_t alt) const {
  return (MayHold(key) && std::binary_search(keys.begin(), keys.end(), key)) ||
         (alt != 0 && MayHold(alt) && std::binary_search(keys.begin(), keys.end(), alt));
}

bool SymbolIndex::Known(std::string_view real_path) { return Get(real_path).known; }

const std::vector<SymbolIndex::Reference>& SymbolIndex::References(std::string_view real_path) {
  auto it = references_.find(real_path);
  if (it != references_.end()) return it->second;
  std::vector<Reference> refs;
  if (const elf::ElfInfo* info = elf_(real_path)) {
    for (size_t i = 0; i < info->imported.size(); ++i) {
      const elf::Symbol& s = info->imported[i];
      if (s.weak) continue;  // glibc leaves an unbound weak reference 0
      Reference r;
      r.symbol = static_cast<uint32_t>(i);
      uint64_t h = elf::SymbolNameHash(s);
      if (s.version.empty()) {
        r.key = h;
      } else {
        r.key = elf::VersionedKey(h, s.version);
        r.alt = elf::VersionedKey(h, "");
      }
      refs.push_back(r);
    }
  }
  hashes_ += refs.size() * 2;
  return references_.emplace(std::string(real_path), std::move(refs)).first->second;
}

std::vector<Unbound> Bind(const LoadGraph& graph, const BindScope& scope, SymbolIndex& index) {
  const auto& objects = graph.objects;
  const int n = static_cast<int>(objects.size());
  std::vector<Unbound> out;
  if (n == 0) return out;
  // Each object's DT_NEEDED that resolved, as graph indices; whether one did not resolve.
  std::vector<std::vector<int>> deps(static_cast<size_t>(n));
  std::vector<bool> unresolved(static_cast<size_t>(n), false),
      runtime(static_cast<size_t>(n), false), host(static_cast<size_t>(n), false);
  for (int i = 0; i < n; ++i) {
    for (const Resolution& r : objects[static_cast<size_t>(i)].resolutions) {
      if (r.kind != Kind::kNeeded) continue;
      if (!r.found()) {
        std::string_view name = util::BaseName(r.name);
        (VersionsEverything(name)                   ? runtime
         : scope.from_host && scope.from_host(name) ? host
                                                    : unresolved)[static_cast<size_t>(i)] = true;
        continue;
      }
      if (int d = graph.Find(r.real_path); d >= 0) deps[static_cast<size_t>(i)].push_back(d);
    }
  }
  // Loads, in the order they happened: preloads (before the root), the root, then
  // each dlopen. Each object belongs to the first load whose breadth-first closure holds it.
  std::vector<int> heads;
  for (int i = 0; i < n; ++i)
    if (!objects[static_cast<size_t>(i)].preloaded_by.empty()) heads.push_back(i);
  heads.push_back(0);
  for (int i = 1; i < n; ++i) {
    const LoadedObject& o = objects[static_cast<size_t>(i)];
    if (o.preloaded_by.empty() && o.loaded_by == Kind::kDlopen) heads.push_back(i);
  }
  const elf::ElfInfo* root = objects[0].elf;
  const bool program = root && !root->interpreter.empty();
  const bool unknown_host = !program && scope.global.empty();
  std::vector<int> owner(static_cast<size_t>(n), -1);
  std::vector<std::vector<int>> closures;
  std::vector<int> global;  // graph objects in the global scope
  for (int head : heads) {
    std::vector<int> closure = {head};
    std::set<int> seen = {head};
    for (size_t k = 0; k < closure.size(); ++k)
      for (int d : deps[static_cast<size_t>(closure[k])])
        if (seen.insert(d).second) closure.push_back(d);
    for (int o : closure)
      if (owner[static_cast<size_t>(o)] < 0)
        owner[static_cast<size_t>(o)] = static_cast<int>(closures.size());
    // An RTLD_LOCAL preload (an extension module's import) keeps its objects to itself.
    const LoadedObject& first = objects[static_cast<size_t>(head)];
    if (head != 0 ? !first.preloaded_by.empty() && !first.preloaded_local : program)
      global.insert(global.end(), closure.begin(), closure.end());
    closures.push_back(std::move(closure));
  }
  // The scope of each load: global scope, then the load's closure; its fingerprint keys the
  // outcomes SymbolIndex keeps across link maps.
  struct Scope {
    std::vector<std::string_view> paths;
    std::vector<const SymbolIndex::Exports*> exports;  ///< of `paths`, looked up once per scope
    bool complete = true;  ///< every DT_NEEDED in it resolved (runtime libraries aside)
    /// A glibc or GCC runtime library in it does not resolve (an image of wheels alone): the
    /// names it would define, seen in versioned references of the scope, hashed and sorted
    /// when first asked (an object already bound in this scope by an earlier link map never
    /// asks).
    bool runtime_missing = false;
    bool host_missing = false;  ///< a library of the host's (the driver) is not in the image
    std::vector<int> members;   ///< graph objects in it
    std::optional<std::vector<uint64_t>> runtime_names;
    bool known = true;  ///< every symbol table in it read whole
    uint64_t fingerprint = 0;
  };
  std::vector<Scope> scopes(closures.size());
  for (size_t g = 0; g < closures.size(); ++g) {
    Scope& s = scopes[g];
    std::set<std::string_view> in;
    auto add = [&](std::string_view path) {
      if (!in.insert(path).second) return;
      s.paths.push_back(path);
      s.exports.push_back(&index.Get(path));
      s.known = s.known && index.Known(path);
    };
    for (const std::string& p : scope.global) add(p);
    for (int o : global) add(objects[static_cast<size_t>(o)].real_path);
    s.members = closures[g];
    s.members.insert(s.members.end(), global.begin(), global.end());
    for (int o : closures[g]) add(objects[static_cast<size_t>(o)].real_path);
    for (int o : s.members) {
      if (unresolved[static_cast<size_t>(o)]) s.complete = false;
      if (runtime[static_cast<size_t>(o)]) s.runtime_missing = true;
      if (host[static_cast<size_t>(o)]) s.host_missing = true;
    }
    uint64_t f = (scope.python_symbols ? 1 : 0) | (s.complete ? 2 : 0) |
                 (s.runtime_missing ? 4 : 0) | (s.host_missing ? 8 : 0);
    for (std::string_view p : in) f = Mix(f * kFnvPrime, p) ^ 0x5a;  // sorted: order-free
    s.fingerprint = f;
  }
  auto runtime_names = [&](Scope& s) -> const std::vector<uint64_t>& {
    if (!s.runtime_names) {
      s.runtime_names.emplace();
      for (int o : s.members)
        if (const elf::ElfInfo* e = objects[static_cast<size_t>(o)].elf)
          for (const elf::Symbol& sym : e->imported)
            if (!sym.version.empty()) s.runtime_names->push_back(elf::SymbolNameHash(sym));
      std::sort(s.runtime_names->begin(), s.runtime_names->end());
    }
    return *s.runtime_names;
  };
  for (int i = 0; i < n; ++i) {
    const LoadedObject& o = objects[static_cast<size_t>(i)];
    int g = owner[static_cast<size_t>(i)];
    if (g < 0 || !o.elf || !index.Known(o.real_path)) continue;
    Scope& s = scopes[static_cast<size_t>(g)];
    if (!s.known) continue;
    uint64_t key = Mix(s.fingerprint, o.real_path);
    auto [memo, fresh] = index.bound_.try_emplace(key);
    if (fresh) {
      // Direct dependencies first: most references bind there. Exports are looked up by path
      // once per object and once per scope, never per reference (a warm scan's time is here;
      // a chain of 2,000 libraries would make per-object scope lookups quadratic).
      std::vector<const SymbolIndex::Exports*> direct;
      for (int d : deps[static_cast<size_t>(i)])
        direct.push_back(&index.Get(objects[static_cast<size_t>(d)].real_path));
      auto defined = [&](const SymbolIndex::Reference& ref) {
        auto has = [&](const SymbolIndex::Exports* e) { return e->Defines(ref.key, ref.alt); };
        return std::any_of(direct.begin(), direct.end(), has) ||
               std::any_of(s.exports.begin(), s.exports.end(), has);
      };
      for (const SymbolIndex::Reference& ref : index.References(o.real_path)) {
        const elf::Symbol& sym = o.elf->imported[ref.symbol];
        if (sym.version.empty() &&
            (!s.complete || (scope.python_symbols && PythonSymbol(sym.name))))
          continue;
        // The driver the host mounts defines C names only (libcuda.so.1: cu*, no _Z symbol).
        if (sym.version.empty() && s.host_missing && !sym.name.starts_with("_Z")) continue;
        // A runtime library the image lacks would define it: named so by the C++ runtime's
        // mangling, or versioned where another object of the scope references it.
        if (sym.version.empty() && s.runtime_missing &&
            (CxxRuntimeSymbol(sym.name) ||
             std::binary_search(runtime_names(s).begin(), runtime_names(s).end(), ref.key)))
          continue;
        // Left for the process to provide (libc10.so's pthread_setname_np, which glibc < 2.34
        // has in libpthread): unknowable without the process's runtime or host.
        if (sym.version.empty() && sym.untyped && (s.runtime_missing || unknown_host)) continue;
        // Known by its hash alone, it cannot be told from a runtime's or the interpreter's.
        if (sym.version.empty() && sym.name.empty() &&
            (s.runtime_missing || scope.python_symbols || unknown_host))
          continue;
        if (!defined(ref)) memo->second.push_back(ref.symbol);
      }
    }
    // Once per version, not per symbol: thousands of GLIBC_2.x references fail alike.
    std::map<std::string_view, VersionFrom> versions;
    for (uint32_t symbol : memo->second) {
      const elf::Symbol& sym = o.elf->imported[symbol];
      Unbound u{i, sym.name, sym.version, "", elf::SymbolNameHash(sym)};
      if (!sym.version.empty()) {
        auto [v, fresh] = versions.try_emplace(sym.version);
        if (fresh) v->second = NeededFrom(graph, o, sym.version);
        // Otherwise ld.so stops at the version check (IC012, IC013's version part), not here.
        if (!v->second.checked) continue;
        u.from = v->second.file;
      }
      out.push_back(std::move(u));
    }
  }
  return out;
}

}  // namespace imgcheck::loader

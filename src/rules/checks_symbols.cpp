// IC013 for every symbol a load binds: each consumer's link map bound as glibc binds it at
// RTLD_NOW (loader::Bind), in the process its root runs in: a Python extension module inside
// the image's own interpreter, a program as its own global scope.
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>

#include "catalog/metadata.h"
#include "loader/bind.h"
#include "rules/context.h"
#include "rules/version.h"
#include "util/path.h"
#include "util/profile.h"

namespace imgcheck::rules {
namespace {

// The C++ name of a mangled symbol ("_ZN3c104cuda..." -> "c10::cuda::..."); others unchanged.
// Long names stay mangled: the demangler recurses on the name's nesting.
std::string Demangle(const std::string& name) {
  if (!name.starts_with("_Z") || name.size() > 1024) return name;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

size_t CommonPrefix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// The part of a symbol name that "should provide" compares, and how much of it must match: an
// Itanium-mangled name without "_Z", "N" and its CV-qualifiers ("_ZNK3c10..." and "_ZN3c10..."
// compare on "3c10..."), needing its first qualifier ("5torch", "3c10", "St"), since "_ZN" begins
// every C++ library's names (libstdc++ was named for a torch symbol); a C name whole, needing 3.
struct NameKey {
  std::string_view key;
  size_t floor;
};
NameKey KeyOf(std::string_view name) {
  if (!name.starts_with("_Z")) return {name, 3};
  size_t i = 2;
  if (i < name.size() && name[i] == 'N') {
    ++i;
    while (i < name.size() && (name[i] == 'K' || name[i] == 'V' || name[i] == 'r')) ++i;
  }
  std::string_view key = name.substr(i);
  if (key.starts_with("St")) return {key, 2};
  size_t len = 0, j = 0;
  while (j < key.size() && key[j] >= '0' && key[j] <= '9' && len <= key.size())
    len = len * 10 + static_cast<size_t>(key[j++] - '0');
  return {key, j == 0 ? std::min<size_t>(3, key.size()) : std::min(key.size(), j + len)};
}

// Whether `elf` defines the name of hash `h` (any version but a hidden one when `version` is
// empty; else that version or none).
bool DefinesName(const elf::ElfInfo& elf, uint64_t h, const std::string& version) {
  if (elf.has_export_keys) {
    auto has = [&](uint64_t k) {
      return std::binary_search(elf.export_keys.begin(), elf.export_keys.end(), k);
    };
    return version.empty() ? has(h)
                           : has(elf::VersionedKey(h, version)) || has(elf::VersionedKey(h, ""));
  }
  return std::any_of(elf.exported.begin(), elf.exported.end(), [&](const elf::Symbol& s) {
    return elf::NameHash(s.name) == h &&
           (version.empty() ? !s.hidden_version : s.version == version || s.version.empty());
  });
}

// Names for the failed references known by their hash alone (the name lay past the bytes the
// capture kept of a large string table): the same name as another object of the image holds it.
void NameHashedSymbols(const catalog::Catalog& cat, std::vector<loader::Unbound>& symbols) {
  std::map<uint64_t, std::string*> wanted;
  for (loader::Unbound& u : symbols)
    if (u.name.empty()) wanted.emplace(u.hash, &u.name);
  if (wanted.empty()) return;
  for (const auto& [path, elf] : cat.elves())
    for (const auto* list : {&elf.exported, &elf.imported})
      for (const elf::Symbol& s : *list) {
        if (s.name.empty()) continue;
        auto it = wanted.find(elf::NameHash(s.name));
        if (it != wanted.end() && it->second->empty()) *it->second = s.name;
      }
  for (loader::Unbound& u : symbols)
    if (u.name.empty()) {
      char hex[17];
      std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(u.hash));
      u.name = "<a symbol whose name was not captured, FNV-1a " + std::string(hex) + ">";
    }
}

// The DT_NEEDED of `object` a failed reference was meant to bind to: the file its version is
// needed from, else the dependency whose exports share the longest prefix with the name
// ("ncclCommRegister" -> libnccl.so.2; KeyOf says what is compared). Null when none resolved
// or none shares enough.
const loader::Resolution* ExpectedFrom(const Context& ctx, const loader::LoadedObject& object,
                                       const loader::Unbound& u) {
  const loader::Resolution* best = nullptr;
  size_t best_len = 0;
  const NameKey want = KeyOf(u.name);
  for (const loader::Resolution& r : object.resolutions) {
    if (r.kind != loader::Kind::kNeeded || !r.found()) continue;
    if (!u.from.empty()) {
      if (r.name == u.from) return &r;
      continue;
    }
    const elf::ElfInfo* elf = ctx.catalog.Elf(r.real_path);
    if (!elf) continue;
    size_t len = 0;
    for (const elf::Symbol& s : elf->exported)
      len = std::max(len, CommonPrefix(KeyOf(s.name).key, want.key));
    if (len > best_len) {
      best = &r;
      best_len = len;
    }
  }
  return best_len >= want.floor || !u.from.empty() ? best : nullptr;
}

struct Failure {
  const Consumer* consumer = nullptr;
  int object = -1;
  std::vector<loader::Unbound> symbols;
  bool optional = true;  ///< every consumer reaching it loads it only on request
};

// IC013 for the object at `path` whose references `f` failed to bind.
Finding ObjectFinding(const Context& ctx, const std::string& path, Failure& f) {
  NameHashedSymbols(ctx.catalog, f.symbols);
  const loader::LoadedObject& object = f.consumer->graph.objects[static_cast<size_t>(f.object)];
  const loader::Unbound& first = f.symbols[0];
  std::string list;
  for (size_t i = 0; i < f.symbols.size() && i < 5; ++i) {
    const loader::Unbound& s = f.symbols[i];
    list += (i ? ", " : "") + Demangle(s.name) + (s.version.empty() ? "" : "@" + s.version);
  }
  if (f.symbols.size() > 5) list += " and " + std::to_string(f.symbols.size() - 5) + " more";
  const loader::Resolution* from = ExpectedFrom(ctx, object, first);
  std::string message = path + " (" + PackageLabel(ctx.catalog, path) + ") needs " +
                        (f.symbols.size() > 1 ? "symbols " : "symbol ") + list +
                        ", which no object in its lookup scope defines";
  std::vector<std::string> paths = {path};
  if (from) {
    message += "; " + from->name + " should provide " + (f.symbols.size() > 1 ? "them" : "it") +
               " and resolves to " + from->real_path + " (" +
               PackageLabel(ctx.catalog, from->real_path) + ")";
    paths.insert(paths.begin(), from->real_path);
    // Another copy of that library in the image that does define it.
    std::string_view base = catalog::LibraryBaseName(util::BaseName(from->real_path));
    for (const auto& [other, elf] : ctx.catalog.elves()) {
      if (other == from->real_path || base.empty() ||
          catalog::LibraryBaseName(util::BaseName(other)) != base ||
          !DefinesName(elf, first.hash, first.version))
        continue;
      message += "; " + other + " (" + PackageLabel(ctx.catalog, other) + ") defines it";
      break;
    }
    // The release the object's package pins for that library's package.
    const catalog::PackageRef* have = ctx.catalog.Owner(from->real_path);
    const catalog::PackageRef* mine = ctx.catalog.Owner(path);
    const catalog::Component* dist = mine ? ctx.Dist(mine->name) : nullptr;
    if (have && dist)
      for (const catalog::Requirement& req : dist->requires_dist)
        if (req.name == catalog::NormalizeDistName(have->name) && !req.Pinned().empty() &&
            !PinHolds(req.Pinned(), have->version) && req.marker.find("extra") == std::string::npos)
          message += "; " + dist->name + " " + dist->version + " pins " + req.name +
                     "==" + req.Pinned() + ", the image has " + have->version;
  }
  Finding finding = ctx.Make("IC013", std::move(message), paths);
  if (f.optional && !f.consumer->optional.empty()) {
    finding.severity = Severity::kInfo;
    finding.message += " (optional: " + f.consumer->optional + ")";
  }
  if (from) finding.evidence.push_back(ResolvedEvidence(*from));
  for (size_t i = 0; i < f.symbols.size() && i < 20; ++i)
    finding.evidence.push_back(
        {"unbound",
         f.symbols[i].name + (f.symbols[i].version.empty() ? "" : "@" + f.symbols[i].version)});
  finding.evidence.push_back({"consumer", f.consumer->path + " (" + f.consumer->package + ")"});
  if (!f.consumer->process.empty()) finding.evidence.push_back({"process", f.consumer->process});
  return finding;
}

// The symbols of the first objects' findings ("unbound" evidence), demangled, at most `n`.
std::string FirstSymbols(const std::vector<Finding>& objects, size_t n) {
  std::vector<std::string> names;
  for (const Finding& o : objects)
    for (const Evidence& e : o.evidence)
      if (e.label == "unbound" && names.size() < n &&
          std::find(names.begin(), names.end(), Demangle(e.value)) == names.end())
        names.push_back(Demangle(e.value));
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// One IC013 for the objects of `dist` that fail in `fw`'s process: the package, the release it
// was built for, the release it meets, how many objects fail with a few symbols, and the fix.
// Each object's own finding stays as evidence (--verbose, JSON).
Finding GroupFinding(const Context& ctx, const catalog::Component& dist,
                     const catalog::Component& fw, const ReleaseMismatch& match,
                     const std::vector<Finding>& objects) {
  std::vector<std::string> paths = {dist.path, fw.path};
  for (const Finding& o : objects) paths.push_back(o.paths.back());
  Finding g = ctx.Make("IC013",
                       dist.name + " " + dist.version +
                           (match.built_for.empty() ? "" : ", built for " + match.built_for + ",") +
                           " meets " + fw.name + " " + fw.version + ": " +
                           std::to_string(objects.size()) + " of its objects need symbols " +
                           fw.name + "'s objects do not define (" + FirstSymbols(objects, 3) + ")",
                       paths, std::max(dist.layer, fw.layer));
  g.remediation = "The release that matches the installed " + fw.name + ": " + match.fix + ".";
  g.evidence.push_back({"installed", fw.name + " " + fw.version + " (" + fw.path + ")"});
  if (!match.built_for.empty())
    g.evidence.push_back({"requires", match.built_for + " (" + dist.path + "/METADATA)"});
  for (const Finding& o : objects) g.evidence.push_back({"object", o.message});
  return g;
}

}  // namespace

void CheckUnboundSymbols(Context& ctx) {
  util::ProfileSpan span(util::Stage::kBind);
  auto lookup = [&ctx](std::string_view p) { return ctx.catalog.Elf(p); };
  loader::SymbolIndex index(lookup);
  // The global scope of each interpreter: its own link map (the loader session's).
  std::map<const loader::LoadGraph*, std::vector<std::string>> globals;
  auto global_of = [&](const loader::LoadGraph* exe) -> const std::vector<std::string>& {
    auto [it, fresh] = globals.try_emplace(exe);
    if (fresh)
      for (const auto& o : exe->objects) it->second.push_back(o.real_path);
    return it->second;
  };
  std::map<std::string, Failure> failures;  // by the failing object's real path
  // Objects whose symbols could not be read whole, with the first consumer loading them: the
  // loads that include them were not bound, which the report must say (an info finding).
  std::map<std::string, const Consumer*> unread;
  // Objects another consumer loads as a dependency. Such a library's references bind in the
  // scope of the load that brings it (glibc: the global scope, then the dlopen root's search
  // list), not in its own: libtorch_cuda.so NEEDS libtorch_nvshmem.so, whose c10::cuda
  // references only libc10_cuda.so, a sibling in torch._C's load, defines. So its own link map
  // as a root does not judge it; the loads that include it do.
  std::set<std::string, std::less<>> dependencies;
  for (const Consumer* c : ctx.AllConsumers())
    for (size_t i = 1; i < c->graph.objects.size(); ++i)
      dependencies.insert(c->graph.objects[i].real_path);
  for (const Consumer* c : ctx.AllConsumers()) {
    if (c->unselected) continue;
    for (const loader::LoadedObject& o : c->graph.objects)
      if (o.elf && !index.Known(o.real_path)) unread.try_emplace(o.real_path, c);
    loader::BindScope scope;
    scope.from_host = [&ctx](std::string_view name) { return ctx.FamilyOf(name) == "driver"; };
    if (loader::Session::Process process = ctx.input.session.InterpreterOf(*c); process.python) {
      if (!process.interpreter) {
        scope.python_symbols = true;  // the interpreter that imports it provides them
      } else {
        scope.global = global_of(process.interpreter);
      }
    }
    for (loader::Unbound& u : loader::Bind(c->graph, scope, index)) {
      const std::string& path = c->graph.objects[static_cast<size_t>(u.object)].real_path;
      if (u.object == 0 && dependencies.count(path)) continue;
      Failure& f = failures[path];
      if (!f.consumer) {
        f.consumer = c;
        f.object = u.object;
      }
      f.optional = f.optional && !c->optional.empty();
      bool known = std::any_of(f.symbols.begin(), f.symbols.end(), [&](const loader::Unbound& s) {
        return s.hash == u.hash && s.name == u.name && s.version == u.version;
      });
      if (!known) f.symbols.push_back(std::move(u));
    }
  }
  for (const auto& [path, c] : unread) {
    const elf::ElfInfo* elf = ctx.catalog.Elf(path);
    std::string why =
        elf->table_limit_reached ? "its dynamic tables expand past the limit" : elf->symbols_unread;
    Finding finding = ctx.Make("IC013",
                               path + " (" + PackageLabel(ctx.catalog, path) +
                                   "): its dynamic symbols could not be read whole (" + why +
                                   "), so the symbols of the loads that include it were not bound",
                               {path});
    finding.severity = Severity::kInfo;
    finding.evidence.push_back({"consumer", c->path + " (" + c->package + ")"});
    ctx.findings.push_back(std::move(finding));
  }
  // One root cause, one finding: the objects of one distribution that fail in the process of
  // the framework the evidence placed them in (the package was built for another release).
  struct Group {
    const catalog::Component* dist = nullptr;
    const catalog::Component* fw = nullptr;
    std::vector<Finding> objects;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (auto& [path, f] : failures) {
    Finding finding = ObjectFinding(ctx, path, f);
    const catalog::PackageRef* owner = ctx.catalog.Owner(path);
    const catalog::Component* dist =
        owner && owner->manager == catalog::PackageManager::kPip ? ctx.Dist(owner->name) : nullptr;
    const catalog::Component* fw =
        f.consumer->framework.empty() ? nullptr : ctx.Dist(f.consumer->framework);
    // The symbols should come from the framework's objects (or from no library it NEEDS).
    const catalog::PackageRef* provider =
        finding.paths.size() > 1 ? ctx.catalog.Owner(finding.paths[0]) : nullptr;
    bool from_fw = finding.paths.size() == 1 || (provider && fw && provider->name == fw->name);
    if (!dist || !fw || dist == fw || !from_fw || finding.severity != Severity::kError) {
      ctx.findings.push_back(std::move(finding));
      continue;
    }
    Group& g = groups[{dist->name, fw->name}];
    g.dist = dist;
    g.fw = fw;
    g.objects.push_back(std::move(finding));
  }
  for (auto& [key, g] : groups) {
    ReleaseMismatch match = MatchRelease(ctx, *g.dist, *g.fw);
    ctx.mismatched.insert(g.dist->name);
    if (g.objects.size() == 1) {
      g.objects[0].remediation =
          "The release that matches the installed " + g.fw->name + ": " + match.fix + ".";
      ctx.findings.push_back(std::move(g.objects[0]));
      continue;
    }
    ctx.findings.push_back(GroupFinding(ctx, *g.dist, *g.fw, match, g.objects));
  }
}

}  // namespace imgcheck::rules

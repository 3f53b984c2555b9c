#include "loader/loader.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <unordered_map>
#include <unordered_set>

#include "catalog/metadata.h"
#include "util/names.h"
#include "util/path.h"
#include "util/text.h"

namespace imgcheck::loader {

namespace {

constexpr auto kReasonNames =
    std::to_array<util::EnumName<Reason>>({{Reason::kAlreadyLoaded, "already-loaded"},
                                           {Reason::kDirectPath, "direct-path"},
                                           {Reason::kRpath, "rpath"},
                                           {Reason::kLdLibraryPath, "ld-library-path"},
                                           {Reason::kRunpath, "runpath"},
                                           {Reason::kLdCache, "ld.so.cache"},
                                           {Reason::kDefaultDir, "default-dir"}});
static_assert(util::NamesEvery(kReasonNames));

constexpr auto kOutcomeNames =
    std::to_array<util::EnumName<Outcome>>({{Outcome::kMissing, "missing"},
                                            {Outcome::kWrongClass, "wrong-class"},
                                            {Outcome::kWrongMachine, "wrong-machine"},
                                            {Outcome::kNotElf, "not-elf"},
                                            {Outcome::kRejected, "rejected-nodeflib"},
                                            {Outcome::kFound, "found"}});
static_assert(util::NamesEvery(kOutcomeNames));

}  // namespace

std::string_view ReasonName(Reason reason) { return util::Name(kReasonNames, reason); }

std::string_view OutcomeName(Outcome outcome) { return util::Name(kOutcomeNames, outcome); }

std::vector<const Resolution*> LoadGraph::Resolutions() const {
  std::vector<const Resolution*> out;
  for (const LoadedObject& o : objects)
    for (const Resolution& r : o.resolutions) out.push_back(&r);
  return out;
}

int LoadGraph::Find(std::string_view real_path) const {
  for (size_t i = 0; i < objects.size(); ++i)
    if (objects[i].real_path == real_path) return static_cast<int>(i);
  return -1;
}

const std::optional<image::Tree::Resolved>& ResolvedPaths::Resolve(const std::string& path) {
  auto it = paths_.find(path);
  if (it == paths_.end()) it = paths_.emplace(path, tree_->Resolve(path)).first;
  return it->second;
}

namespace {

// glibc's open_path directory form: trailing slashes collapsed to one ("" stays "": the
// working directory).
std::string DirPrefix(std::string dir) {
  if (dir.empty()) return dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.back() != '/') dir += '/';
  return dir;
}

}  // namespace

std::string LoadGraph::Origin(int i) const {
  const LoadedObject& o = objects.at(static_cast<size_t>(i));
  // The directory of the path, as _dl_new_object cuts it: "/" for "/x", "." for a bare name.
  std::string_view path = i == 0 ? o.real_path : o.path;
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string ExpandDynamicTokens(std::string_view entry, std::string_view origin,
                                const Platform& platform) {
  std::string out;
  for (size_t i = 0; i < entry.size();) {
    if (entry[i] != '$') {
      out += entry[i++];
      continue;
    }
    bool matched = false;
    for (auto [name, value] : {std::pair<std::string_view, std::string_view>{"ORIGIN", origin},
                               {"PLATFORM", platform.platform},
                               {"LIB", platform.lib}}) {
      std::string_view rest = entry.substr(i + 1);
      size_t len = 0;
      if (rest.starts_with(name)) {
        len = name.size();
        char next = len < rest.size() ? rest[len] : '\0';
        if (std::isalnum(static_cast<unsigned char>(next)) || next == '_') len = 0;
      } else if (rest.size() > name.size() + 1 && rest[0] == '{' &&
                 rest.substr(1, name.size()) == name && rest[name.size() + 1] == '}') {
        len = name.size() + 2;
      }
      if (len != 0) {
        out += value;
        i += 1 + len;
        matched = true;
        break;
      }
    }
    if (!matched) out += entry[i++];
  }
  return out;
}

namespace {

struct SearchDir {
  std::string entry;  // as written
  std::string dir;    // expanded, DirPrefix form
};

// A DT_RPATH/DT_RUNPATH/LD_LIBRARY_PATH list as glibc's fillin_rpath builds it: tokens
// expanded against `origin`, duplicates dropped. A list that is one empty string is no list
// (decompose_rpath); an empty element inside a list is the working directory. More than
// `limits.search_dirs` directories: util::LimitExceeded naming `what`.
std::vector<SearchDir> SearchList(const std::vector<std::string>& entries,
                                  const std::string& origin, const Platform& platform,
                                  const util::Limits& limits, const std::string& what) {
  std::vector<SearchDir> out;
  if (entries.size() == 1 && entries[0].empty()) return out;
  std::unordered_set<std::string> seen;
  for (const std::string& e : entries) {
    SearchDir d{e, DirPrefix(ExpandDynamicTokens(e, origin, platform))};
    if (!seen.insert(d.dir).second) continue;
    if (out.size() == limits.search_dirs)
      util::LimitExceeded("the directories of " + what, std::to_string(limits.search_dirs),
                          "--max-search-dirs");
    out.push_back(std::move(d));
  }
  return out;
}

const std::vector<std::string>& EffectiveRpath(const elf::ElfInfo* e) {
  static const std::vector<std::string> kNone;
  return e->has_runpath ? kNone : e->rpath;  // glibc ignores DT_RPATH when DT_RUNPATH exists
}

// One unit of the loader's work: an object mapped or a candidate file tried.
void Spend(Budget& budget, const Options& options) {
  if (budget.left == 0)
    util::LimitExceeded("the loader's work on this image (objects mapped and files tried)",
                        std::to_string(options.limits.loader_work), "--max-loader-work");
  --budget.left;
}

std::shared_ptr<Budget> BudgetOf(const Options& options) {
  return options.budget ? options.budget
                        : std::make_shared<Budget>(Budget{options.limits.loader_work});
}

// Options::resolved when it belongs to `tree`, else a new one.
std::shared_ptr<ResolvedPaths> PathsOf(const image::Tree& tree, const Options& options) {
  return options.resolved && &options.resolved->tree() == &tree
             ? options.resolved
             : std::make_shared<ResolvedPaths>(tree);
}

// The parts joined, in one allocation.
std::string Concat(std::initializer_list<std::string_view> parts) {
  size_t n = 0;
  for (std::string_view p : parts) n += p.size();
  std::string out;
  out.reserve(n);
  for (std::string_view p : parts) out += p;
  return out;
}

class Search {
 public:
  Search(ResolvedPaths& paths, const ElfLookup& elf, const Options& options, Budget& budget,
         Resolution& result)
      : paths_(paths), elf_(elf), options_(options), budget_(budget), r_(result) {}

  // One candidate file; on kFound fills the resolution.
  bool Try(Reason phase, const std::string& entry, std::string path) {
    Spend(budget_, options_);
    if (path.empty() || path[0] != '/') {
      std::string wd = util::NormalizePath(options_.working_dir);
      path = (wd == "/" ? wd : wd + "/") + path;  // relative to the working directory
    }
    const std::optional<image::Tree::Resolved>& resolved = paths_.Resolve(path);
    Outcome outcome = Outcome::kMissing;
    if (resolved && resolved->node && resolved->node->type == image::NodeType::kRegular) {
      const elf::ElfInfo* info = elf_(resolved->path);
      const Platform& p = options_.platform;
      if (info == nullptr)
        outcome = Outcome::kNotElf;
      else if (info->is64 != p.is64)
        outcome = Outcome::kWrongClass;
      else if (info->machine != p.machine)
        outcome = Outcome::kWrongMachine;
      else
        outcome = Outcome::kFound;
    }
    if (outcome == Outcome::kNotElf) {
      // open_verify: a file that is not ELF at all is a hard error, not a skipped candidate.
      r_.status = Status::kError;
      r_.error = path + ": not an ELF file (ld.so: invalid ELF header / file too short)";
    } else if (outcome == Outcome::kFound) {
      r_.status = Status::kFound;
      r_.reason = phase;
      r_.path = path;
      r_.real_path = resolved->path;
      r_.entry = entry;
    }
    // A search tries thousands of candidates: each path is built once, and moved here.
    r_.tried.push_back({phase, entry, std::move(path), outcome});
    return outcome == Outcome::kNotElf || outcome == Outcome::kFound;
  }

  // open_path: every directory of the list, glibc-hwcaps subdirectories first.
  bool TryList(Reason phase, const std::vector<SearchDir>& dirs, std::string_view name) {
    for (const SearchDir& d : dirs) {
      for (const std::string& hw : options_.platform.hwcaps)
        if (Try(phase, d.entry, Concat({d.dir, "glibc-hwcaps/", hw, "/", name}))) return true;
      if (Try(phase, d.entry, Concat({d.dir, name}))) return true;
    }
    return false;
  }

  bool TryCache(std::string_view name, bool nodeflib) {
    const Platform& p = options_.platform;
    const std::string kEntry = "/etc/ld.so.cache";
    if (options_.cache == nullptr) return false;
    const catalog::LdCacheRecord* rec =
        options_.cache->Lookup(name, catalog::CacheFlagsFor(p.machine, p.is64), p.hwcaps);
    if (rec == nullptr) {
      r_.tried.push_back({Reason::kLdCache, kEntry, "", Outcome::kMissing});
      return false;
    }
    if (nodeflib) {
      // glibc: with NODEFLIB, a cache entry inside a system directory is not used.
      for (const std::string& d : p.default_dirs) {
        if (rec->path.starts_with(DirPrefix(d))) {
          r_.tried.push_back({Reason::kLdCache, kEntry, rec->path, Outcome::kRejected});
          return false;
        }
      }
    }
    return Try(Reason::kLdCache, kEntry, rec->path);
  }

 private:
  ResolvedPaths& paths_;
  const ElfLookup& elf_;
  const Options& options_;
  Budget& budget_;
  Resolution& r_;
};

// `name` with {version:N} replaced by the first N components of `version`; nullopt when the
// version has fewer (or the placeholder is malformed).
std::optional<std::string> ExpandVersion(const std::string& name, const std::string& version) {
  constexpr std::string_view kOpen = "{version:";
  size_t at = name.find(kOpen);
  if (at == std::string::npos) return name;
  size_t close = name.find('}', at);
  if (close == std::string::npos || close != at + kOpen.size() + 1) return std::nullopt;
  int n = name[at + kOpen.size()] - '0';
  std::vector<std::string> parts = util::Split(version, '.');
  if (n < 1 || static_cast<size_t>(n) > parts.size()) return std::nullopt;
  std::string cut;
  for (int i = 0; i < n; ++i) {
    const std::string& p = parts[static_cast<size_t>(i)];
    if (p.empty() || !std::all_of(p.begin(), p.end(), [](char c) { return std::isdigit(c); }))
      return std::nullopt;
    cut += (i ? "." : "") + p;
  }
  return name.substr(0, at) + cut + name.substr(close + 1);
}

bool NameMatches(const LoadedObject& o, std::string_view name) {
  if (o.path == name || (o.elf != nullptr && o.elf->soname == name)) return true;
  return std::find(o.names.begin(), o.names.end(), name) != o.names.end();
}

// What one link map's lookups share: each object's search lists, built once (a consumer deep
// in a chain of loaders searches every loader's DT_RPATH), and, for Load, an index of the
// names the objects answer to. A 1 MB LD_LIBRARY_PATH or a chain of thousands of libraries
// then costs one pass, not one per name looked up.
class LinkMap {
 public:
  LinkMap(const image::Tree& tree, const LoadGraph& graph, const Options& options)
      : graph_(graph),
        options_(options),
        budget_(BudgetOf(options)),
        paths_(PathsOf(tree, options)) {}

  Budget& budget() { return *budget_; }
  ResolvedPaths& paths() { return *paths_; }

  const std::vector<SearchDir>& Rpath(int i) {
    return List(rpath_, i, EffectiveRpath(Object(i).elf), "the DT_RPATH of ");
  }
  const std::vector<SearchDir>& Runpath(int i) {
    return List(runpath_, i, Object(i).elf->runpath, "the DT_RUNPATH of ");
  }
  // LD_LIBRARY_PATH: split on ':' and ';', tokens expanded for the main program.
  const std::vector<SearchDir>& LdLibraryPath() {
    if (!llp_) {
      std::string llp = options_.ld_library_path.value_or("");
      std::replace(llp.begin(), llp.end(), ';', ':');
      llp_ = llp.empty() ? std::vector<SearchDir>{}
                         : SearchList(util::Split(llp, ':'), graph_.Origin(0), options_.platform,
                                      options_.limits, "the image's LD_LIBRARY_PATH");
    }
    return *llp_;
  }

  // The first object answering to `name` (_dl_name_match_p, l_soname); -1 when none.
  int Loaded(std::string_view name) const {
    if (indexed_) {
      auto it = by_name_.find(std::string(name));
      return it == by_name_.end() ? -1 : it->second;
    }
    for (size_t i = 0; i < graph_.objects.size(); ++i)
      if (NameMatches(graph_.objects[i], name)) return static_cast<int>(i);
    return -1;
  }
  int Find(std::string_view real_path) const {
    if (!indexed_) return graph_.Find(real_path);
    auto it = by_real_path_.find(std::string(real_path));
    return it == by_real_path_.end() ? -1 : it->second;
  }
  // Load keeps the index: after each object added to the graph, and each name added to one.
  void Index() {
    indexed_ = true;
    for (; indexed_objects_ < graph_.objects.size(); ++indexed_objects_) {
      const LoadedObject& o = graph_.objects[indexed_objects_];
      int at = static_cast<int>(indexed_objects_);
      by_real_path_.emplace(o.real_path, at);
      by_name_.emplace(o.path, at);
      if (!o.elf->soname.empty()) by_name_.emplace(o.elf->soname, at);
      for (const std::string& n : o.names) IndexName(n, at);
    }
  }
  void IndexName(const std::string& name, int at) {
    auto [it, added] = by_name_.emplace(name, at);
    if (!added) it->second = std::min(it->second, at);
  }

 private:
  const LoadedObject& Object(int i) const { return graph_.objects[static_cast<size_t>(i)]; }
  const std::vector<SearchDir>& List(std::vector<std::optional<std::vector<SearchDir>>>& lists,
                                     int i, const std::vector<std::string>& entries,
                                     const char* what) {
    if (lists.size() < graph_.objects.size()) lists.resize(graph_.objects.size());
    auto& list = lists[static_cast<size_t>(i)];
    if (!list)
      list = SearchList(entries, graph_.Origin(i), options_.platform, options_.limits,
                        what + Object(i).real_path);
    return *list;
  }

  const LoadGraph& graph_;
  const Options& options_;
  std::shared_ptr<Budget> budget_;
  std::shared_ptr<ResolvedPaths> paths_;
  std::vector<std::optional<std::vector<SearchDir>>> rpath_, runpath_;
  std::optional<std::vector<SearchDir>> llp_;
  bool indexed_ = false;
  size_t indexed_objects_ = 0;
  std::unordered_map<std::string, int> by_name_, by_real_path_;
};

Resolution ResolveIn(const ElfLookup& elf, const LoadGraph& graph, LinkMap& map, int consumer,
                     std::string_view name, Kind kind, const Options& options);

}  // namespace

Platform DetectPlatform(const image::Tree& tree, uint16_t machine, bool is64) {
  Platform p;
  p.machine = machine;
  p.is64 = is64;
  p.hwcaps.clear();
  p.lib = is64 ? "lib64" : "lib";
  p.default_dirs = is64 ? std::vector<std::string>{"/lib64", "/usr/lib64"}
                        : std::vector<std::string>{"/lib", "/usr/lib"};
  p.platform.clear();
  p.interpreter.clear();
  if (const elf::Abi* abi = elf::FindAbi(machine, is64)) {
    if (!abi->hwcaps.empty()) p.hwcaps = {std::string(abi->hwcaps)};
    p.platform = abi->platform;
    p.interpreter = abi->interpreter;
    std::string triplet(abi->triplet);
    for (const char* lib : {"/lib/", "/usr/lib/"}) {
      auto libc = tree.Resolve(lib + triplet + "/libc.so.6");
      if (libc && libc->node) {
        // Debian/Ubuntu build glibc with multiarch directories as the system search path and
        // as $LIB.
        p.lib = "lib/" + triplet;
        p.default_dirs = {"/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"};
        break;
      }
    }
  }
  // glibc-hwcaps subdirectories exist since glibc 2.33. Before 2.34 the library file was
  // named libc-2.NN.so, so such a file says the image's glibc is older.
  for (const std::string& dir : p.default_dirs) {
    auto resolved = tree.Resolve(dir);
    if (!resolved) continue;
    for (std::string_view name : tree.List(resolved->path)) {
      if (name.size() <= 10 || !name.starts_with("libc-2.") || !name.ends_with(".so")) continue;
      std::optional<unsigned> minor = util::ParseInt<unsigned>(name.substr(7, name.size() - 10));
      if (minor && *minor < 33) p.hwcaps.clear();
    }
  }
  return p;
}

util::Expected<Platform> ImagePlatform(const image::Tree& tree, const catalog::Catalog& catalog,
                                       std::string_view architecture) {
  // The ELF that says what the image runs: its libc, else an executable's interpreter (musl's
  // libc is its interpreter).
  std::vector<std::string> libcs;
  for (const elf::Abi& abi : elf::kAbis)
    for (const char* dir : {"/lib/", "/usr/lib/"})
      libcs.push_back(dir + std::string(abi.triplet) + "/libc.so.6");
  for (const char* dir : {"/lib64/", "/usr/lib64/", "/lib/", "/usr/lib/"})
    libcs.push_back(dir + std::string("libc.so.6"));
  std::string from;
  const elf::ElfInfo* found = nullptr;
  auto try_path = [&](std::string_view path) {
    auto r = tree.Resolve(path);
    if (!r || !r->node || !(found = catalog.Elf(r->path))) return false;
    from = r->path;
    return true;
  };
  bool have = std::any_of(libcs.begin(), libcs.end(), try_path);
  // Another ABI's multiarch libc (/lib/powerpc64le-linux-gnu/libc.so.6, libc-2.31.so).
  for (auto it = catalog.elves().begin(); !have && it != catalog.elves().end(); ++it) {
    std::string_view path = it->first, name = util::BaseName(path);
    if ((path.starts_with("/lib/") || path.starts_with("/usr/lib/")) &&
        (name == "libc.so.6" || (name.starts_with("libc-") && name.ends_with(".so"))))
      have = try_path(path);
  }
  for (auto it = catalog.elves().begin(); !have && it != catalog.elves().end(); ++it)
    if (!it->second.interpreter.empty()) have = try_path(it->second.interpreter);
  if (have) {
    if (elf::FindAbi(found->machine, found->is64) == nullptr)
      return util::MakeError(from + " is for ELF machine " + std::to_string(found->machine) +
                             (found->is64 ? " (64-bit)" : " (32-bit)") +
                             ", which the loader does not model: library resolution skipped");
    return DetectPlatform(tree, found->machine, found->is64);
  }
  // No ELF to ask: the configuration's architecture; none stated means amd64.
  const elf::Abi* abi = elf::FindArchitecture(architecture.empty() ? "amd64" : architecture);
  if (abi == nullptr)
    return util::MakeError("architecture " + std::string(architecture) +
                           " is not one the loader models: library resolution skipped");
  return DetectPlatform(tree, abi->machine, abi->is64);
}

Resolution Resolve(const image::Tree& tree, const ElfLookup& elf, const LoadGraph& graph,
                   int consumer, std::string_view name, Kind kind, const Options& options) {
  LinkMap map(tree, graph, options);
  return ResolveIn(elf, graph, map, consumer, name, kind, options);
}

namespace {

Resolution ResolveIn(const ElfLookup& elf, const LoadGraph& graph, LinkMap& map, int consumer,
                     std::string_view name, Kind kind, const Options& options) {
  Resolution r;
  const LoadedObject& self = graph.objects.at(static_cast<size_t>(consumer));
  r.consumer = self.real_path;
  r.name = std::string(name);
  r.kind = kind;
  r.status = Status::kNotFound;

  // Already in the link map under this name, path or soname (_dl_name_match_p, l_soname).
  if (int at = map.Loaded(name); at >= 0) {
    const LoadedObject& o = graph.objects[static_cast<size_t>(at)];
    r.status = Status::kFound;
    r.reason = Reason::kAlreadyLoaded;
    r.path = o.path;
    r.real_path = o.real_path;
    r.entry = o.preloaded_by;
    return r;
  }

  Search s(map.paths(), elf, options, map.budget(), r);
  const Platform& p = options.platform;
  if (name.find('/') != std::string_view::npos) {
    s.Try(Reason::kDirectPath, r.name, ExpandDynamicTokens(name, graph.Origin(consumer), p));
    return r;
  }

  const elf::ElfInfo& info = *self.elf;
  if (!info.has_runpath) {
    // DT_RPATH of the consumer, then of the object that loaded it, and on up; then the main
    // program's, unless the chain already covered it.
    bool did_main = false;
    for (int l = consumer; l >= 0; l = graph.objects[static_cast<size_t>(l)].loader) {
      const std::vector<SearchDir>& dirs = map.Rpath(l);
      if (dirs.empty()) continue;
      did_main |= l == 0;
      if (s.TryList(Reason::kRpath, dirs, name)) {
        r.rpath_owner = graph.objects[static_cast<size_t>(l)].real_path;
        return r;
      }
    }
    if (!did_main && s.TryList(Reason::kRpath, map.Rpath(0), name)) {
      r.rpath_owner = graph.objects[0].real_path;
      return r;
    }
  }
  if (s.TryList(Reason::kLdLibraryPath, map.LdLibraryPath(), name)) return r;
  if (info.has_runpath && s.TryList(Reason::kRunpath, map.Runpath(consumer), name)) return r;
  if (s.TryCache(name, info.nodeflib())) return r;
  if (!info.nodeflib()) {
    std::vector<SearchDir> defaults;
    for (const std::string& d : p.default_dirs) defaults.push_back({d, DirPrefix(d)});
    if (s.TryList(Reason::kDefaultDir, defaults, name)) return r;
  }
  return r;
}

}  // namespace

LoadGraph Load(const image::Tree& tree, const ElfLookup& elf, std::string_view root,
               const Options& options) {
  LoadGraph g;
  const elf::ElfInfo* root_elf = elf(root);
  if (root_elf == nullptr) return g;
  g.objects.push_back(
      {std::string(root), std::string(root), root_elf, {}, -1, Kind::kNeeded, {}, {}, false});
  // The interpreter is mapped before any dependency and answers to its path and soname.
  std::string interp =
      root_elf->interpreter.empty() ? options.platform.interpreter : root_elf->interpreter;
  if (!interp.empty()) {
    auto resolved = tree.Resolve(interp);
    const elf::ElfInfo* interp_elf =
        resolved && resolved->node && resolved->path != root ? elf(resolved->path) : nullptr;
    if (interp_elf != nullptr)
      g.objects.push_back(
          {interp, resolved->path, interp_elf, {interp}, -1, Kind::kNeeded, {}, {}, false});
  }
  // A link map past the bound stops the run: a partial one would hide what it did not load.
  LinkMap map(tree, g, options);
  auto room = [&] {
    Spend(map.budget(), options);
    if (g.objects.size() >= options.limits.loader_objects)
      util::LimitExceeded("the link map of " + std::string(root),
                          std::to_string(options.limits.loader_objects), "--max-loader-objects");
  };
  map.Index();

  auto admit = [&](size_t i, Resolution r) {
    const std::string& name = r.name;
    if (r.found()) {
      int at = map.Find(r.real_path);  // the same file under another name is the same object
      if (at >= 0) {
        auto& names = g.objects[static_cast<size_t>(at)].names;
        if (std::find(names.begin(), names.end(), name) == names.end()) {
          names.push_back(name);
          map.IndexName(name, at);
        }
      } else {
        room();
        g.objects.push_back({r.path,
                             r.real_path,
                             elf(r.real_path),
                             {name},
                             static_cast<int>(i),
                             r.kind,
                             {},
                             {},
                             false});
        map.Index();
      }
    }
    g.objects[i].resolutions.push_back(std::move(r));
  };
  // One dlopen: its names in turn until one loads; when none does, the last name's resolution
  // with every attempt.
  auto dlopen = [&](size_t i, const DlopenCall& call) {
    std::string version = options.version_of ? options.version_of(g.objects[i].real_path) : "";
    std::optional<Resolution> last;
    std::vector<Attempt> tried;
    for (const std::string& pattern : call.names) {
      std::optional<std::string> name = ExpandVersion(pattern, version);
      if (!name) continue;
      Resolution r = ResolveIn(elf, g, map, static_cast<int>(i), *name, Kind::kDlopen, options);
      if (r.found()) return admit(i, std::move(r));
      tried.insert(tried.end(), r.tried.begin(), r.tried.end());
      last = std::move(r);
    }
    if (!last) return;
    if (last->status == Status::kNotFound) last->tried = std::move(tried);
    admit(i, std::move(*last));
  };

  auto map_needed = [&](size_t i) {
    for (const std::string& name : g.objects[i].elf->needed)
      admit(i, ResolveIn(elf, g, map, static_cast<int>(i), name, Kind::kNeeded, options));
  };
  // What the package loaded before the root, each one dlopen that maps its whole dependency tree
  // before the next begins: a later one finds what an earlier one brought in by name (torchaudio's
  // libtorchaudio.so NEEDS libc10.so, which torch._C's import loaded two levels down).
  size_t needed_done = 0, dlopen_done = 0;
  const size_t first_preload = g.objects.size();
  for (const Preload& p : options.preload) {
    const elf::ElfInfo* info = elf(p.real_path);
    if (info == nullptr || map.Find(p.real_path) >= 0) continue;
    room();
    g.objects.push_back(
        {p.real_path, p.real_path, info, {}, -1, Kind::kDlopen, {}, p.why, !p.global});
    map.Index();
    for (size_t k = g.objects.size() - 1; k < g.objects.size(); ++k) map_needed(k);
  }
  if (first_preload < g.objects.size()) {
    // Then the root's DT_NEEDED, with everything the preloads brought in already there.
    needed_done = g.objects.size();
    for (size_t k = 0; k < first_preload; ++k) map_needed(k);
  }
  while (true) {
    // Breadth-first over DT_NEEDED, as _dl_map_object_deps; then one object's dlopens.
    for (; needed_done < g.objects.size(); ++needed_done) map_needed(needed_done);
    if (dlopen_done >= g.objects.size()) break;
    size_t i = dlopen_done++;
    std::string file(util::BaseName(util::NormalizePath(g.objects[i].real_path)));
    std::string link(util::BaseName(util::NormalizePath(g.objects[i].path)));
    const std::string& soname = g.objects[i].elf->soname;
    for (const DlopenRule& rule : options.dlopen) {
      // A copy vendored by auditwheel (libcudnn-74a4c495.so.9.1.0) opens what the original
      // opens, by the same names, from its own search path.
      bool match =
          util::GlobMatch(rule.caller, file) || util::GlobMatch(rule.caller, link) ||
          (!soname.empty() && util::GlobMatch(rule.caller, soname)) ||
          util::GlobMatch(rule.caller, catalog::UnvendoredName(file)) ||
          (!soname.empty() && util::GlobMatch(rule.caller, catalog::UnvendoredName(soname)));
      if (!match) continue;
      for (const DlopenCall& call : rule.calls) dlopen(i, call);
    }
  }
  return g;
}

}  // namespace imgcheck::loader

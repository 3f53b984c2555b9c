// Checks over the driver side and the target machine: IC020-IC022, IC030, IC031, IC040.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "catalog/metadata.h"
#include "rules/context.h"
#include "rules/fixes.h"
#include "util/path.h"
#include "util/text.h"

namespace imgcheck::rules {

namespace {

using catalog::Component;
using catalog::ComponentKind;

bool IsStub(const Context& ctx, std::string_view real_path) {
  const Component* c = ctx.LibraryAt(real_path);
  if (c) return c->kind == ComponentKind::kDriverStub;
  return real_path.find("/stubs/") != std::string_view::npos;
}

// The directory a path names after following links in the image; "" when it is not one.
std::string RealDir(const Context& ctx, std::string_view dir) {
  auto r = ctx.tree.Resolve(dir);
  return r && r->node && r->node->type == image::NodeType::kDirectory ? r->path : "";
}

// How the image's own loader configuration puts the real directory `dir` on every program's
// search path: LD_LIBRARY_PATH entries, ld.so.conf lines (the container runtime's ldconfig
// hook rebuilds the cache from them), ld.so.cache entries. With `soname`, only where a
// lookup of that name lands in `dir` (ldconfig links a soname to its file; a search path
// entry needs the file under that name). Empty when nothing does.
std::vector<std::string> OnLoaderPath(const Context& ctx, const std::string& dir,
                                      std::string_view soname = {}) {
  std::vector<std::string> via;
  for (const auto& e : ctx.catalog.config.LdLibraryPath()) {
    if (e.empty() || e[0] != '/' || RealDir(ctx, e) != dir) continue;
    if (!soname.empty()) {
      auto file = ctx.tree.Resolve(util::JoinPath(e, soname));
      if (!file || !file->node || util::DirName(file->path) != dir) continue;
    }
    via.push_back("LD_LIBRARY_PATH entry " + e);
  }
  for (const auto& d : ctx.catalog.config.ld_so_conf.dirs)
    if (RealDir(ctx, d.dir) == dir)
      via.push_back(d.file + ":" + std::to_string(d.line) + " names " + d.dir);
  if (const auto& cache = ctx.catalog.config.ld_so_cache)
    for (const auto& e : cache->entries)
      if ((soname.empty() || e.name == soname) &&
          (util::DirName(e.path) == dir || RealDir(ctx, util::DirName(e.path)) == dir)) {
        via.push_back(ctx.catalog.config.ld_so_cache_path + " maps " + e.name + " to " + e.path);
        break;
      }
  return via;
}

void CheckStubOnPath(Context& ctx) {
  std::set<std::string> reported;
  auto report = [&](const Consumer& consumer, const loader::Resolution& r) {
    if (!r.found() || !IsStub(ctx, r.real_path) || !reported.insert(r.real_path).second) return;
    Finding f = ctx.Make("IC020",
                         "the loader finds the toolkit stub " + r.real_path + " for " + r.name +
                             " (" + std::string(loader::ReasonName(r.reason)) +
                             (r.entry.empty() ? "" : " " + r.entry) +
                             "): the host driver the container runtime mounts is never reached",
                         {r.real_path});
    f.evidence.push_back({"consumer", consumer.path});
    f.evidence.push_back(ResolvedEvidence(r));
    if (r.reason == loader::Reason::kLdLibraryPath) f.env = "LD_LIBRARY_PATH";
    ctx.findings.push_back(std::move(f));
  };
  // Any CUDA program started in the container later, with or without one in the image: a stub
  // whose directory the image's loader configuration names gets libcuda.so.1 before the host
  // driver the runtime mounts into a system directory.
  for (const Component* stub : ctx.catalog.Find(ComponentKind::kDriverStub)) {
    if (stub->deleted || !stub->elf || stub->elf->soname != "libcuda.so.1" ||
        !reported.insert(stub->path).second)
      continue;
    std::string dir(util::DirName(stub->path));
    std::vector<std::string> via = OnLoaderPath(ctx, dir, "libcuda.so.1");
    // One stub under several names (libcuda.so and libcuda.so.1 copied alike) is one problem:
    // the file the loader takes for libcuda.so.1 in that directory.
    auto picked = ctx.tree.Resolve(util::JoinPath(dir, "libcuda.so.1"));
    std::string path = picked && picked->node ? picked->path : stub->path;
    if (via.empty() || (path != stub->path && !reported.insert(path).second)) {
      if (via.empty()) reported.erase(stub->path);
      continue;
    }
    Finding f = ctx.Make("IC020",
                         "libcuda.so.1 resolves to the toolkit stub " + path + " (" + via[0] +
                             "): the host driver the container runtime mounts is never reached",
                         {path});
    for (const auto& v : via) f.evidence.push_back({"on path", v});
    if (via[0].starts_with("LD_LIBRARY_PATH")) {
      f.env = "LD_LIBRARY_PATH";
      for (const auto& e : ctx.catalog.config.LdLibraryPath())
        if (!e.empty() && e[0] == '/' && RealDir(ctx, e) == dir)
          if (std::string env = EnvWithout(ctx, e); !env.empty())
            f.remediation = env + " (drops the stubs directory " + e +
                            "; stubs are for linking, the runtime mounts the driver).";
    }
    ctx.findings.push_back(std::move(f));
  }
  for (const auto& seen : ctx.Resolutions())
    if (seen.resolution.name.starts_with("libcuda.so")) report(*seen.consumer, seen.resolution);
  // The CUDA runtime dlopens libcuda.so.1; resolve it as it would, whatever dlopen.json lists.
  for (const Consumer* consumer : ctx.AllConsumers())
    for (const auto& lib : ctx.LoadedWithPrefix({consumer}, "libcudart.so."))
      report(*consumer, ctx.input.session.Resolve(*consumer, lib.index, "libcuda.so.1",
                                                  loader::Kind::kDlopen));
}

std::string OwnerKey(const Component& c) {
  if (c.owner)
    return std::string(catalog::ManagerName(c.owner->manager)) + " package " + c.owner->name;
  return std::string(util::DirName(c.path));
}

// A copy auditwheel renamed (pynvvideocodec.libs/libcuda-40d19bb1.so, its SONAME rewritten the
// same way) answers only to that name, which only the objects auditwheel repaired NEED. When no
// link map loads it, nothing can: the modules NEED libcuda.so.1, which the host's driver
// provides.
bool NeverLoaded(const Context& ctx, const Component& c) {
  return catalog::IsVendoredName(util::BaseName(c.path)) && ctx.Loaded(c.path).empty();
}

void CheckDriverInImage(Context& ctx) {
  // Per owner, and apart: the copies a load can reach, and those it cannot.
  std::map<std::pair<std::string, bool>, std::vector<const Component*>> groups;
  for (const Component* c : ctx.catalog.Find(ComponentKind::kDriverLibrary))
    if (!c->deleted) groups[{OwnerKey(*c), NeverLoaded(ctx, *c)}].push_back(c);
  for (const auto& [key, list] : groups) {
    const auto& [owner, dead] = key;
    std::vector<std::string> paths;
    for (const Component* c : list) paths.push_back(c->path);
    std::string version = list[0]->version.empty() ? "" : " " + list[0]->version;
    std::string what = std::to_string(list.size()) + " user-mode driver librar" +
                       (list.size() == 1 ? "y" : "ies") + version + " from " + owner + " (" +
                       paths[0] + (list.size() > 1 ? ", ..." : "") + ")";
    Finding f = ctx.Make(
        "IC021",
        what + (list.size() == 1 ? " is" : " are") +
            (dead ? " never loaded: renamed by auditwheel, so it answers only to its own "
                    "SONAME, which nothing in the image NEEDS or dlopens; the host's driver is "
                    "what loads"
                  : " baked into the image; the host's driver must provide them"),
        paths, list[0]->layer);
    if (dead) f.severity = Severity::kInfo;
    for (const Component* c : list) Context::AddComponentEvidence(f, *c, c->name + " ");
    ctx.findings.push_back(std::move(f));
  }
}

void CheckForwardCompat(Context& ctx) {
  std::map<std::string, std::vector<const Component*>> dirs;
  for (const Component* c : ctx.catalog.Find(ComponentKind::kCompatLibrary))
    if (!c->deleted) dirs[std::string(util::DirName(c->path))].push_back(c);
  for (const auto& [dir, list] : dirs) {
    std::vector<std::string> via = OnLoaderPath(ctx, dir);
    if (via.empty()) continue;
    std::vector<std::string> paths;
    for (const Component* c : list) paths.push_back(c->path);
    Finding f = ctx.Make("IC022",
                         "forward-compatibility driver libraries in " + dir + " (" + list[0]->name +
                             (list[0]->version.empty() ? "" : " " + list[0]->version) +
                             ") are on the loader path: " + via[0],
                         paths, list[0]->layer);
    for (const auto& v : via) f.evidence.push_back({"on path", v});
    if (via[0].starts_with("LD_LIBRARY_PATH")) f.env = "LD_LIBRARY_PATH";
    ctx.findings.push_back(std::move(f));
  }
}

void CheckDriverTooOld(Context& ctx) {
  const Target& t = ctx.input.target;
  if (!t.driver) return;
  const std::pair<Known, std::string>* worst = nullptr;
  Version worst_min;
  std::string worst_how;
  std::vector<Evidence> evidence;
  auto needs = CudaNeeds(ctx);
  for (const auto& need : needs) {
    std::string how;
    auto min = ctx.knowledge.MinDriver(need.first.version, &how);
    if (!min) continue;
    evidence.push_back({"CUDA " + need.first.version.str(),
                        "needs driver " + min->str() + " (" + how + "): " + need.second});
    if (*t.driver >= *min) continue;
    if (!worst || *min > worst_min) {
      worst = &need;
      worst_min = *min;
      worst_how = how;
    }
  }
  if (!worst) return;
  Finding f = ctx.Make("IC030",
                       "the target driver " + t.driver->str() + " (" + t.driver_from +
                           ") cannot run CUDA " + worst->first.version.str() + " (" +
                           worst->first.how + ", " + worst->second + "): it needs driver " +
                           worst_min.str() + " or newer (" + worst_how + ")",
                       {worst->second});
  f.evidence = std::move(evidence);
  ctx.findings.push_back(std::move(f));
}

// The CUDA a NVIDIA_REQUIRE_CUDA value lets through: the lowest `cuda>=X.Y` (or `cuda>X.Y`)
// among its OR-ed terms (libnvidia-container's requirement grammar).
std::optional<Version> DeclaredCuda(const std::string& value) {
  std::optional<Version> lowest;
  for (const auto& term : util::Split(value, ' ')) {
    for (const auto& expr : util::Split(term, ',')) {
      std::string e = util::AsciiLower(expr);
      if (!e.starts_with("cuda>")) continue;
      if (auto v = Version::Parse(e.substr(e[5] == '=' ? 6 : 5)); v && (!lowest || *v < *lowest))
        lowest = v;
    }
  }
  return lowest;
}

void CheckRequireCuda(Context& ctx) {
  const auto& config = ctx.catalog.config;
  if (auto disable = config.Env("NVIDIA_DISABLE_REQUIRE")) {
    std::string d = util::AsciiLower(*disable);
    if (d == "1" || d == "t" || d == "true") return;
  }
  std::optional<Version> declared;
  std::string declared_text, declared_env = "NVIDIA_REQUIRE_CUDA";
  if (auto require = config.Env("NVIDIA_REQUIRE_CUDA"); require && !require->empty()) {
    declared = DeclaredCuda(*require);
    declared_text = "NVIDIA_REQUIRE_CUDA=" + *require;
  } else if (auto legacy = config.Env("CUDA_VERSION")) {
    // A legacy image: the container toolkit derives cuda>=MAJOR.MINOR from CUDA_VERSION.
    if (auto v = Version::Parse(*legacy)) declared = v->Prefix(2);
    declared_env = "CUDA_VERSION";
    declared_text =
        "CUDA_VERSION=" + *legacy + " (legacy: cuda>=" + (declared ? declared->str() : "?") + ")";
  }
  if (!declared) return;
  const std::pair<Known, std::string>* top = nullptr;
  auto needs = CudaNeeds(ctx);
  for (const auto& need : needs)
    if (!top || need.first.version.Prefix(2) > top->first.version.Prefix(2)) top = &need;
  if (!top || top->first.version.Prefix(2) <= declared->Prefix(2)) return;
  if (declared_text.size() > 120) declared_text = declared_text.substr(0, 117) + "...";
  Finding f =
      ctx.Make("IC031",
               declared_text + " lets the container start with CUDA " + declared->Prefix(2).str() +
                   " drivers, but the image needs CUDA " + top->first.version.Prefix(2).str() +
                   " (" + top->first.how + ", " + top->second + ")",
               {top->second}, -1);
  f.evidence.push_back({"declared", declared_text});
  for (const auto& need : needs)
    f.evidence.push_back(
        {"needs CUDA " + need.first.version.str(), need.first.how + ": " + need.second});
  f.env = declared_env;
  ctx.findings.push_back(std::move(f));
}

std::string SmList(const std::vector<unsigned>& sms, std::string_view prefix) {
  std::string s;
  for (unsigned sm : sms) s += (s.empty() ? "" : ",") + std::string(prefix) + std::to_string(sm);
  return s.empty() ? "none" : s;
}

// The CUDA major of the NVIDIA release a library component was installed from: the pip wheel's
// "-cu12" suffix or its nvidia/cu13/ directory, the deb's "-12-4" suffix; nullopt when the
// owner is no CUDA release package or does not say.
std::optional<int> ReleaseMajor(const Context& ctx, const Component& c) {
  if (!c.owner || !ctx.knowledge.libraries().IsCudaPackage(c.owner->manager, c.owner->name))
    return std::nullopt;
  auto digits = [](std::string_view s) -> std::optional<int> {
    if (s.empty() || s.size() > 3 || !std::all_of(s.begin(), s.end(), ::isdigit))
      return std::nullopt;
    return std::stoi(std::string(s));
  };
  const std::string& name = c.owner->name;
  if (c.owner->manager == catalog::PackageManager::kPip) {
    if (size_t at = name.rfind("-cu"); at != std::string::npos)
      if (auto major = digits(std::string_view(name).substr(at + 3))) return major;
    if (size_t at = c.path.find("/nvidia/cu"); at != std::string::npos) {
      std::string_view rest = std::string_view(c.path).substr(at + 10);
      return digits(rest.substr(0, rest.find('/')));
    }
  } else if (c.owner->manager == catalog::PackageManager::kDpkg) {
    size_t minor = name.rfind('-');
    if (minor != std::string::npos && minor > 0 && digits(name.substr(minor + 1))) {
      size_t major = name.rfind('-', minor - 1);
      if (major != std::string::npos) return digits(name.substr(major + 1, minor - major - 1));
    }
  }
  return std::nullopt;
}

void CheckGpuArch(Context& ctx) {
  if (!ctx.input.target.sm) return;
  unsigned target = static_cast<unsigned>(*ctx.input.target.sm);
  std::map<std::string, std::vector<std::string>> by_dir;
  std::map<std::string, std::string> detail;  // by file: its device code
  for (const auto& [path, elf] : ctx.catalog.elves()) {
    if (elf.fatbin.empty()) continue;
    // The fatbin listing of NVIDIA's release libraries is not all their device code (the cu13
    // wheel's libcufft.so.12 lists only sm_75 SASS and runs on sm_90): they are judged by the
    // SM range of their release; for framework and application code the fatbin is the truth.
    if (const Component* c = ctx.LibraryAt(path);
        c && c->owner &&
        ctx.knowledge.libraries().IsCudaPackage(c->owner->manager, c->owner->name)) {
      const CudaSmRow* range = nullptr;
      if (auto major = ReleaseMajor(ctx, *c)) range = ctx.knowledge.CudaSm(*major);
      if (!range || static_cast<int>(target) >= range->min_sm) continue;
      by_dir[std::string(util::DirName(path))].push_back(path);
      detail[path] = "CUDA " + std::to_string(range->cuda_major) +
                     " release libraries support sm_" + std::to_string(range->min_sm) +
                     " and newer";
      continue;
    }
    std::set<unsigned> sass, ptx;
    for (const auto& e : elf.fatbin)
      (e.kind == elf::FatbinEntry::Kind::kCubin ? sass : ptx).insert(e.sm);
    // SASS runs on the same major at an equal or higher minor; PTX is JIT-compiled upwards.
    bool ok = std::any_of(sass.begin(), sass.end(),
                          [&](unsigned s) { return s / 10 == target / 10 && s <= target; }) ||
              std::any_of(ptx.begin(), ptx.end(), [&](unsigned s) { return s <= target; });
    if (ok) continue;
    by_dir[std::string(util::DirName(path))].push_back(path);
    detail[path] = "SASS " + SmList({sass.begin(), sass.end()}, "sm_") + ", PTX " +
                   SmList({ptx.begin(), ptx.end()}, "compute_");
  }
  for (const auto& [dir, paths] : by_dir) {
    std::string arch = ctx.knowledge.ArchName(*ctx.input.target.sm);
    Finding f =
        ctx.Make("IC040",
                 std::to_string(paths.size()) + " file(s) in " + dir + " (" + paths[0] + ": " +
                     detail[paths[0]] + ") have no device code for the target GPU sm_" +
                     std::to_string(target) + (arch.empty() ? "" : " (" + arch + ")") + ", " +
                     ctx.input.target.gpu_from,
                 paths);
    f.evidence.push_back(
        {"target GPU", "sm_" + std::to_string(target) + " (" + ctx.input.target.gpu_from + ")"});
    for (const auto& p : paths) f.evidence.push_back({"device code", p + ": " + detail[p]});
    ctx.findings.push_back(std::move(f));
  }
}

}  // namespace

std::vector<Check> DriverChecks() {
  return {{"IC020", CheckStubOnPath},    {"IC021", CheckDriverInImage},
          {"IC022", CheckForwardCompat}, {"IC030", CheckDriverTooOld},
          {"IC031", CheckRequireCuda},   {"IC040", CheckGpuArch}};
}

}  // namespace imgcheck::rules

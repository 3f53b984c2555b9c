// Checks over how libraries are found: IC010-IC016, IC051, IC060, IC061.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "catalog/metadata.h"
#include "rules/config.h"
#include "rules/context.h"
#include "rules/fixes.h"
#include "util/path.h"

namespace imgcheck::rules {

namespace {

using catalog::Component;

bool IsCudaFamily(const Context& ctx, std::string_view name) {
  std::string f = ctx.FamilyOf(name);
  return !f.empty() && f != "driver";
}

void CheckShadowed(Context& ctx) {
  for (const auto& seen : ctx.Resolutions()) {
    const auto& r = seen.resolution;
    if (!r.found() || !IsCudaFamily(ctx, r.name)) continue;
    if (r.reason == loader::Reason::kRpath || r.reason == loader::Reason::kRunpath ||
        r.reason == loader::Reason::kDirectPath)
      continue;
    const auto& object = seen.consumer->graph.objects[static_cast<size_t>(seen.object)];
    if (!object.elf) continue;
    // The $ORIGIN the loader searched with: the directory the object was opened from.
    std::string origin = seen.consumer->graph.Origin(seen.object);
    const auto& entries = object.elf->has_runpath ? object.elf->runpath : object.elf->rpath;
    for (const auto& entry : entries) {
      std::string dir =
          loader::ExpandDynamicTokens(entry, origin, ctx.input.session.options().platform);
      if (dir.find('$') != std::string::npos) continue;  // a token ld.so does not know either
      auto own = ctx.tree.Resolve(util::JoinPath(dir, r.name));
      if (!own || !own->node || own->node->type != image::NodeType::kRegular ||
          own->path == r.real_path)
        continue;
      auto own_version = ctx.VersionOf(ctx.LibraryAt(own->path));
      auto got_version = ctx.VersionOf(ctx.LibraryAt(r.real_path));
      if (!own_version || !got_version || *own_version == *got_version) break;
      Finding f = ctx.Make(
          "IC010",
          object.real_path + " ships " + r.name + " " + own_version->str() + " at " + own->path +
              " (its " + (object.elf->has_runpath ? "RUNPATH " : "RPATH ") + entry +
              ") but the loader finds " + r.name + " " + got_version->str() + " at " + r.real_path +
              " first (" + std::string(loader::ReasonName(r.reason)) + ")",
          {r.real_path, own->path, object.real_path});
      f.evidence.push_back({"consumer", seen.consumer->path});
      f.evidence.push_back(ResolvedEvidence(r));
      // DT_RPATH is searched before LD_LIBRARY_PATH, DT_RUNPATH after it (ld.so(8)).
      std::string env = r.reason == loader::Reason::kLdLibraryPath ? EnvWithout(ctx, r.entry) : "";
      f.remediation =
          "Let " + std::string(util::BaseName(object.real_path)) + " find its own " + own->path +
          ": " +
          (!env.empty() ? env + " (drops " + r.entry + ", which wins over RUNPATH)"
                        : "remove " + r.real_path + " or the directory that leads to it") +
          ", or patchelf --force-rpath --set-rpath " + entry + " " + object.real_path +
          " (DT_RPATH is searched before LD_LIBRARY_PATH).";
      ctx.findings.push_back(std::move(f));
      break;
    }
  }
}

// The soname major of a library component ("libcudnn.so.9" -> "9"), to tell separate ABIs apart.
std::string SonameKey(const Component& c) {
  std::string soname =
      c.elf && !c.elf->soname.empty() ? c.elf->soname : std::string(util::BaseName(c.path));
  size_t so = soname.find(".so");
  if (so == std::string::npos) return c.name;
  std::string rest = soname.substr(so + 3);
  auto v = Version::Parse(rest.empty() ? rest : rest.substr(1));
  // libcudart.so.10.1 and libcudart.so.10.0 are different sonames; from 11 only the major.
  return c.name + "/" +
         (v ? (v->major() <= 10 ? v->Prefix(2).str() : std::to_string(v->major())) : "");
}

// Copies compare within one soname and one version line (libraries.json version_lines: CUPTI's
// 2024.1.0 is no newer than its wheel's 12.4.127); a copy another distribution vendors for its
// own use compares with none unless something outside that distribution loads it.
void CheckStale(Context& ctx) {
  std::map<std::string, std::vector<const Component*>> groups;
  for (const auto& c : ctx.catalog.components) {
    if (c.kind != catalog::ComponentKind::kCudaLibrary || c.deleted) continue;
    std::optional<Version> v = ctx.VersionOf(&c);
    if (!v || ctx.VendoredOnly(c)) continue;
    const catalog::Family* family = ctx.knowledge.libraries().Find(c.family);
    std::string line(family ? family->LineOf(v->str()) : "");
    groups[SonameKey(c) + (line.empty() ? "" : " (" + line + " versions)")].push_back(&c);
  }
  for (const auto& [key, copies] : groups) {
    const Component* newest =
        *std::max_element(copies.begin(), copies.end(),
                          [&](auto* a, auto* b) { return *ctx.VersionOf(a) < *ctx.VersionOf(b); });
    auto newest_version = *ctx.VersionOf(newest);
    for (const Component* c : copies) {
      auto v = *ctx.VersionOf(c);
      if (v >= newest_version) continue;
      auto users = ctx.Loaded(c->path);
      // Each CUDA library is a root of its own link map: it does not load itself.
      std::erase_if(users, [&](const auto& user) { return user.first->path == c->path; });
      // A package asked for by name that nothing loads was installed on purpose: at most info,
      // and no fix removes it. A copy a consumer loads stays what it is.
      std::string asked = users.empty() && c->owner ? ctx.catalog.Requested(*c->owner) : "";
      std::string state = !asked.empty()
                              ? "installed on purpose (" + asked + "); no consumer loads it"
                          : users.empty() ? "left behind (no consumer loads it)"
                                          : "reachable: " + users[0].first->path + " loads it";
      Finding f = ctx.Make("IC011",
                           c->name + " " + v.str() + " at " + c->path + " is older than " +
                               newest_version.str() + " at " + newest->path + "; " + state,
                           {c->path, newest->path}, c->layer);
      f.evidence.push_back({"same soname", key});
      Context::AddComponentEvidence(f, *c, "older copy ");
      Context::AddComponentEvidence(f, *newest, "newest copy ");
      for (const auto& user : users) f.evidence.push_back({"loaded by", user.first->path});
      f.remediation =
          (c->owner ? RemoveOr(ctx, *c->owner, "it installed the older copy",
                               "make sure no loader path reaches " + c->path)
                    : "delete " + c->path + " in the layer that writes it (a later RUN rm " +
                          "hides it but keeps its bytes in the image)") +
          (users.empty() ? "" : ", so that " + users[0].first->path + " loads " + newest->path);
      if (newest->owner && c->owner && newest->owner->manager == c->owner->manager &&
          newest->owner->name == c->owner->name)
        f.remediation = "reinstall " + c->owner->name + " " + newest->owner->version +
                        " cleanly: files of an older version were left beside it";
      f.remediation[0] = static_cast<char>(std::toupper(f.remediation[0]));
      f.remediation += ".";
      if (!asked.empty()) {
        f.severity = Severity::kInfo;
        f.evidence.push_back({"asked for", asked});
        f.remediation = "None needed: " + c->owner->name +
                        " was asked for by name and nothing in the image loads this copy; keep " +
                        "it out of LD_LIBRARY_PATH and ld.so.conf so that nothing does.";
      }
      ctx.findings.push_back(std::move(f));
    }
  }
}

// "layer 3 (COPY libcudnn_graph.so.9 /usr/...)" for the message's blame.
std::string LayerText(const Context& ctx, int index) {
  LayerRef l = ctx.Layer(index);
  return "layer " + std::to_string(index) + (l.created_by.empty() ? "" : " (" + l.created_by + ")");
}

// True when some consumer other than a CUDA library's own root loads `real_path`: a program,
// an extension or a framework would hit what that object lacks.
bool Reached(const Context& ctx, std::string_view real_path) {
  for (const auto& [consumer, index] : ctx.Loaded(real_path))
    if (consumer->role.rfind("cuda-library ", 0) != 0) return true;
  return false;
}

// The directories a failed search tried, each once, in order.
std::vector<std::string> TriedDirs(const loader::Resolution& r) {
  std::vector<std::string> dirs;
  for (const auto& a : r.tried) {
    std::string dir(util::DirName(a.path));
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  return dirs;
}

// The NVIDIA wheels that ship `name` (libraries.json wheel_libraries), of the consumer's CUDA
// major (its wheel's -cuN, or the CUDA runtime or cuBLAS it names) where that narrows them
// (libcurand.so.10 is in the -cu11, -cu12 and unsuffixed CUDA 13 projects): "nvidia-curand-cu12",
// "" when none does. A wheel that vendors a copy for itself (triton's CUPTI) is not a provider.
std::string ShippedBy(const Context& ctx, const std::string& name, const std::string& consumer) {
  std::vector<std::string> projects;
  for (const WheelLibrariesRow& row : ctx.knowledge.wheel_libraries())
    if (row.project.rfind("nvidia-", 0) == 0 &&
        std::find(row.libraries.begin(), row.libraries.end(), name) != row.libraries.end() &&
        std::find(projects.begin(), projects.end(), row.project) == projects.end())
      projects.push_back(row.project);
  auto digits = [](std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(),
                                        [](unsigned char c) { return std::isdigit(c) != 0; });
  };
  // "nvidia-cudnn-cu12" -> 12; 0 for a project of no major suffix.
  auto suffix_major = [&](const std::string& project) {
    size_t cu = project.rfind("-cu");
    return cu != std::string::npos && digits(std::string_view(project).substr(cu + 3))
               ? std::atoi(project.c_str() + cu + 3)
               : 0;
  };
  // The consumer's CUDA major: its own wheel's suffix, else its runtime or cuBLAS soname.
  const catalog::Component* dist = OwningDist(ctx, consumer);
  int major = dist ? suffix_major(dist->name) : 0;
  if (const elf::ElfInfo* elf = ctx.catalog.Elf(consumer)) {
    std::vector<std::string> names = elf->needed;
    names.push_back(elf->soname);
    for (const std::string& n : names)
      for (std::string_view lib : {"libcudart.so.", "libcublas.so.", "libcublasLt.so."})
        if (major == 0 && n.rfind(lib, 0) == 0) major = std::atoi(n.c_str() + lib.size());
  }
  std::vector<std::string> of_major;
  for (const std::string& p : projects)
    if (major != 0 && (suffix_major(p) != 0 ? suffix_major(p) == major : major >= 13))
      of_major.push_back(p);
  std::vector<std::string>& shown = of_major.empty() ? projects : of_major;
  std::string out;
  for (size_t i = 0; i < shown.size(); ++i)
    out += (i == 0 ? "" : i + 1 == shown.size() ? " or " : ", ") + shown[i];
  return out;
}

// What provides a soname no file of the image has: the wheel the consumer's own distribution
// pins (its Requires-Dist of the library's family), else the wheels that ship it and the
// family's other package kinds. A library of no family the tables know is still one the loader
// must find: the wheel that ships it is named all the same.
std::string Provider(const Context& ctx, const std::string& name, const std::string& consumer) {
  std::string family = ctx.FamilyOf(name);
  const catalog::Family* fam = nullptr;
  for (const auto& f : ctx.knowledge.libraries().families)
    if (f.family == family) fam = &f;
  std::string wheels = ShippedBy(ctx, name, consumer);
  if (!fam) return wheels.empty() ? "" : "install the pip wheel " + wheels + ", which ships it";
  if (std::string pinned = RequiredInstall(ctx, family, OwningDist(ctx, consumer)); !pinned.empty())
    return pinned;
  // The globs of libraries.json as names to fill in: "nvidia-cudnn-cu[0-9]*" -> "nvidia-cudnn-cuN".
  auto shown = [](std::string glob) {
    for (size_t at = glob.find("[0-9]*"); at != std::string::npos; at = glob.find("[0-9]*"))
      glob.replace(at, 6, "N");
    return glob;
  };
  std::vector<std::string> kinds;
  if (!wheels.empty())
    kinds.push_back("the pip wheel " + wheels);
  else if (!fam->pip.empty())
    kinds.push_back("the pip wheel " + shown(fam->pip[0]));
  if (!fam->dpkg.empty()) kinds.push_back("the Debian/Ubuntu package " + shown(fam->dpkg[0]));
  if (!fam->conda.empty()) kinds.push_back("the conda package " + shown(fam->conda[0]));
  return kinds.empty() ? ""
                       : "install " + family + " for the CUDA major " +
                             std::string(util::BaseName(consumer)) + " was built for (" +
                             JoinAnd(kinds) + ")";
}

// The call the consumer's package offers to load the nvidia-* wheels' libraries itself
// (dlopen.json's preload_calls: onnxruntime.preload_dlls()), when the libraries it misses are in
// the wheels' site-packages/nvidia directories and its release has the call; "" otherwise.
std::string PreloadCall(const Context& ctx, const std::string& consumer,
                        const std::vector<std::string>& present_dirs) {
  const bool in_wheels = std::all_of(present_dirs.begin(), present_dirs.end(), [](const auto& d) {
    return d.find("-packages/nvidia/") != std::string::npos;
  });
  const catalog::Component* dist = OwningDist(ctx, consumer);
  if (!dist || !in_wheels) return "";
  std::optional<Version> version = Version::Parse(dist->version);
  for (const PreloadCallRow& row : ctx.knowledge.preload_calls())
    if (util::GlobMatch(row.package, dist->name) && version && *version >= row.from)
      return ", or " + row.call + " before " + row.before + " (" + dist->name + " " +
             dist->version + " loads them from there)";
  return "";
}

// The fix IC012's evidence supports: a path change when the image has the library elsewhere,
// an install (of what the consumer pins, where it pins) when it does not.
std::string UnresolvedFix(const Context& ctx, const std::vector<std::string>& names,
                          const std::string& consumer, const std::vector<std::string>& dirs,
                          const std::map<std::string, std::string, std::less<>>& file_of) {
  std::vector<std::string> present_dirs, present, absent;
  for (const auto& n : names) {
    auto at = file_of.find(n);
    if (at == file_of.end()) {
      absent.push_back(n);
      continue;
    }
    present.push_back(n + " is at " + at->second + " (" + PackageLabel(ctx.catalog, at->second) +
                      ")");
    std::string dir(util::DirName(at->second));
    if (std::find(present_dirs.begin(), present_dirs.end(), dir) == present_dirs.end())
      present_dirs.push_back(dir);
  }
  std::vector<std::string> parts;
  if (!present.empty()) {
    std::string list;
    for (const auto& d : present_dirs) list += (list.empty() ? "" : ":") + d;
    std::string path = ctx.catalog.config.Env("LD_LIBRARY_PATH").value_or("");
    const elf::ElfInfo* elf = ctx.catalog.Elf(consumer);
    std::string runpath;
    if (elf)
      for (const auto& e : elf->has_runpath ? elf->runpath : elf->rpath)
        runpath += (runpath.empty() ? "" : ":") + e;
    parts.push_back(
        JoinAnd(present) + ", outside the search of " + consumer +
        (dirs.empty() ? "" : " (" + std::to_string(dirs.size()) + " directories)") +
        (present.size() > 1 ? "; reach them with" : "; reach it with") + " ENV LD_LIBRARY_PATH=" +
        list + (path.empty() ? "" : ":" + path) + ", or a file in /etc/ld.so.conf.d/ listing " +
        JoinAnd(present_dirs) + " and ldconfig, or " +
        (runpath.empty()
             ? "patchelf --set-rpath " + list + " " + consumer
             : "its " + std::string(elf->has_runpath ? "RUNPATH " : "RPATH ") + runpath +
                   " extended: patchelf --set-rpath " + runpath + ":" + list + " " + consumer) +
        PreloadCall(ctx, consumer, present_dirs));
  }
  // Names one provider serves (cuDNN's sub-libraries) are said once, with it.
  std::vector<std::pair<std::string, std::vector<std::string>>> by_provider;
  for (const auto& n : absent) {
    std::string p = Provider(ctx, n, consumer);
    auto it = std::find_if(by_provider.begin(), by_provider.end(),
                           [&](const auto& e) { return e.first == p; });
    if (it == by_provider.end()) it = by_provider.insert(by_provider.end(), {p, {}});
    it->second.push_back(n);
  }
  for (const auto& [p, names] : by_provider)
    parts.push_back("no file of the image provides " + JoinAnd(names) +
                    (p.empty() ? "" : ": " + p));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out.empty() ? out : out + ".";
}

// What a framework does without its GPU libraries (dlopen.json's cpu_fallback), when `callers`
// miss only those (by dlopen, or by DT_NEEDED of a provider loaded on request) and the image has
// no file named like any of them: a CPU install (pip install tensorflow without [and-cuda]), not
// a broken one. "" otherwise: some of them present means the image was meant for the GPU.
std::string CpuInstall(const Context& ctx, const std::vector<std::string>& names,
                       const std::vector<std::string>& callers,
                       const std::map<std::string, std::string, std::less<>>& file_of) {
  for (const CpuFallbackRow& row : ctx.knowledge.cpu_fallback()) {
    auto gpu_library = [&](std::string_view name) {
      return std::any_of(row.names.begin(), row.names.end(),
                         [&](const std::string& g) { return util::GlobMatch(g, name); });
    };
    auto caller = [&](const std::string& path) {
      const elf::ElfInfo* elf = ctx.catalog.Elf(path);
      return util::GlobMatch(row.caller, util::BaseName(path)) ||
             (elf && !elf->soname.empty() && util::GlobMatch(row.caller, elf->soname));
    };
    if (std::all_of(callers.begin(), callers.end(), caller) &&
        std::all_of(names.begin(), names.end(), gpu_library) &&
        std::none_of(file_of.begin(), file_of.end(),
                     [&](const auto& e) { return gpu_library(e.first); }))
      return row.runs;
  }
  return "";
}

// The objects on an import path, by real path: in the link map of a Python extension module
// (Consumer::imported), the module, what its process preloaded, and what those need (DT_NEEDED,
// recursively). What a dlopen rule loads (cuDNN's engine libraries, a provider) loads on use,
// not at import: jax's `import jax` works without the libcuda.so.1 that
// libcudnn_engines_runtime_compiled.so.9 NEEDS.
std::set<std::string_view> ImportPath(const Context& ctx) {
  std::set<std::string_view> out;
  for (const Consumer* c : ctx.AllConsumers()) {
    if (!c->imported) continue;
    // Objects come in load order, each after the one that first requested it.
    std::vector<bool> on(c->graph.objects.size(), false);
    for (size_t i = 0; i < c->graph.objects.size(); ++i) {
      const loader::LoadedObject& o = c->graph.objects[i];
      on[i] = o.loader < 0 || !o.preloaded_by.empty() ||
              (o.loaded_by == loader::Kind::kNeeded && on[static_cast<size_t>(o.loader)]);
      if (on[i]) out.insert(o.real_path);
    }
  }
  return out;
}

void CheckUnresolved(Context& ctx) {
  // Where each soname lies in the image, for dependencies a library's own search misses.
  std::map<std::string, std::string, std::less<>> file_of;
  for (const auto& [path, elf] : ctx.catalog.elves()) {
    file_of.emplace(util::BaseName(path), path);
    if (!elf.soname.empty()) file_of.emplace(elf.soname, path);
  }
  // A CUDA library, or any DT_NEEDED of an object an import loads: the import fails on it
  // (ImportError: <name>: cannot open shared object file), whatever library it names; likewise
  // what a module's first call loads (on_call: libnvvm.so.4 is of no family). Not the driver's:
  // the container runtime mounts it from the host (vllm's modules NEED libcuda.so.1).
  const std::set<std::string_view> import_path = ImportPath(ctx);
  auto required = [&](const SeenResolution& seen) {
    const auto& r = seen.resolution;
    if (ctx.FamilyOf(r.name) == "driver") return false;
    return IsCudaFamily(ctx, r.name) ||
           (r.kind == loader::Kind::kDlopen && seen.consumer->on_call && seen.object == 0) ||
           (r.kind == loader::Kind::kNeeded &&
            import_path.count(
                seen.consumer->graph.objects[static_cast<size_t>(seen.object)].real_path));
  };
  std::map<std::string, std::vector<const SeenResolution*>> by_name;
  for (const auto& seen : ctx.Resolutions())
    if (!seen.resolution.found() && required(seen)) by_name[seen.resolution.name].push_back(&seen);
  // One problem per cause: the names the same requesters miss through the same search path.
  // An optional feature's absent system libraries (its row says who provides them) are one
  // cause however many of its objects miss them: torio's FFmpeg 4, 5 and 6 variants.
  struct Cause {
    std::vector<std::string> names, paths, dirs;
    std::vector<const SeenResolution*> list;
    std::string backend;  ///< the feature's `when`, for those
  };
  std::vector<Cause> causes;
  for (const auto& [name, list] : by_name) {
    std::vector<std::string> paths;
    for (const auto* s : list)
      paths.push_back(s->consumer->graph.objects[static_cast<size_t>(s->object)].real_path);
    std::sort(paths.begin(), paths.end());
    paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
    std::vector<std::string> dirs = TriedDirs(list[0]->resolution);
    const auto kind = list[0]->resolution.kind;  // clang 14 lambdas cannot name a binding
    const Consumer* first = list[0]->consumer;
    std::string backend = first->optional_system.empty() ? "" : first->optional;
    for (const auto* s : list)
      if (s->consumer->optional != backend) backend.clear();
    auto same = std::find_if(causes.begin(), causes.end(), [&](const Cause& c) {
      if (!backend.empty() || !c.backend.empty()) return c.backend == backend;
      return c.paths == paths && c.dirs == dirs && c.list[0]->resolution.kind == kind;
    });
    if (same == causes.end()) {
      causes.push_back({{name}, paths, dirs, list, backend});
    } else {
      same->names.push_back(name);
      same->list.insert(same->list.end(), list.begin(), list.end());
      for (const std::string& p : paths)
        if (std::find(same->paths.begin(), same->paths.end(), p) == same->paths.end())
          same->paths.push_back(p);
    }
  }
  for (const Cause& cause : causes) {
    const auto& paths = cause.paths;
    const auto& list = cause.list;
    bool reached = std::any_of(paths.begin(), paths.end(),
                               [&](const std::string& p) { return Reached(ctx, p); });
    const auto& r = list[0]->resolution;
    std::string how = r.kind == loader::Kind::kDlopen ? "dlopen" : "DT_NEEDED";
    // A later layer that deleted a file the search would have found broke it: blame that one.
    int deleted_in = -1;
    for (const auto* s : list)
      for (const auto& a : s->resolution.tried)
        if (const image::Deletion* d = ctx.tree.FindDeleted(a.path); d && deleted_in < 0)
          deleted_in = d->layer;
    Finding f = ctx.Make(
        "IC012",
        (deleted_in >= 0 ? "deleted by " + LayerText(ctx, deleted_in) + ": " : "") +
            JoinAnd(cause.names) + " (" + how + " of " + paths[0] + ", " +
            PackageLabel(ctx.catalog, paths[0]) +
            (paths.size() > 1 ? ", and " + std::to_string(paths.size() - 1) + " more" : "") +
            ") cannot be resolved" +
            (reached ? ""
                     : "; no program, extension or framework in the image loads " +
                           std::string(util::BaseName(paths[0]))),
        paths, deleted_in >= 0 ? deleted_in : Context::kLayerOfFirstPath);
    // Only files their package loads on request need it: info that says when.
    const Consumer* optional = nullptr;
    for (const auto* s : list)
      if (!s->consumer->optional.empty()) optional = s->consumer;
    bool all_optional = std::all_of(list.begin(), list.end(), [](const SeenResolution* s) {
      return !s->consumer->optional.empty();
    });
    if (all_optional && optional) {
      f.severity = Severity::kInfo;
      f.message += " (optional: " + optional->optional + ")";
    }
    const std::string cpu = CpuInstall(ctx, cause.names, paths, file_of);
    if (!cpu.empty()) {
      f.severity = Severity::kInfo;
      f.message += " (a CPU install: the image has none of its GPU libraries; " + cpu + ")";
    }
    // Unreached: a warning; info when the image has the library and only this object's own
    // search misses it. Nothing for a pip wheel's library: NVIDIA's wheels leave that to the
    // consumer, which loads them first (a stock torch install's libcusolverMg.so.12).
    if (!reached && !all_optional && cpu.empty()) {
      std::vector<std::string> at;
      for (const auto& n : cause.names)
        if (auto elsewhere = file_of.find(n); elsewhere != file_of.end())
          at.push_back(elsewhere->second);
      bool wheels = std::all_of(paths.begin(), paths.end(), [&](const std::string& p) {
        const catalog::PackageRef* owner = ctx.catalog.Owner(p);
        return owner && owner->manager == catalog::PackageManager::kPip;
      });
      if (at.size() == cause.names.size() && wheels) continue;
      f.severity = at.size() == cause.names.size() ? Severity::kInfo : Severity::kWarning;
      if (!at.empty()) f.message += " (the image has " + JoinAnd(at) + ")";
    }
    if (!cause.backend.empty()) {
      // What the package loads itself is loaded; what is absent is the system's.
      f.remediation =
          "Only where the feature is used: install " + list[0]->consumer->optional_system + ".";
    } else if (std::string fix = UnresolvedFix(ctx, cause.names, paths[0], cause.dirs, file_of);
               !fix.empty()) {
      f.remediation = fix;
    }
    // Loads a package cannot do without (numba-cuda's NVVM and NVRTC): what fails, its fix.
    if (const Consumer* first = list[0]->consumer;
        !first->on_call_fails.empty() && std::all_of(list.begin(), list.end(), [&](auto* s) {
          return s->object == 0 && s->consumer->on_call_fails == first->on_call_fails;
        })) {
      f.message += ": " + first->on_call_fails;
      f.remediation = first->on_call_fix;
    }
    std::set<std::string> consumers;
    for (const auto* s : list) {
      f.evidence.push_back(ResolvedEvidence(s->resolution));
      if (consumers.insert(s->consumer->path).second)
        f.evidence.push_back({"consumer", s->consumer->path + " (" + s->consumer->package + ")"});
    }
    ctx.findings.push_back(std::move(f));
  }
  // Consumers that cannot run whatever their CUDA libraries do: once per package, as info.
  // Those an import loads are not: their failure is the import's, reported above.
  std::map<std::string, std::vector<const Consumer*>> stranded;
  for (const Consumer& c : ctx.input.session.consumers())
    if (!c.not_runnable.empty() && !import_path.count(c.path)) stranded[c.package].push_back(&c);
  for (const auto& [package, list] : stranded) {
    std::vector<std::string> paths;
    for (const Consumer* c : list) paths.push_back(c->path);
    Finding f = ctx.Make(
        "IC012",
        list[0]->path +
            (list.size() > 1 ? " and " + std::to_string(list.size() - 1) + " more files" : "") +
            " of " + package + " not runnable as shipped: " + list[0]->not_runnable +
            " does not resolve either, so CUDA libraries are not checked for " +
            (list.size() > 1 ? "them" : "it"),
        paths);
    f.severity = Severity::kInfo;
    for (const Consumer* c : list)
      for (const auto& r : c->graph.objects[0].resolutions)
        if (r.name == c->not_runnable) {
          Evidence e = ResolvedEvidence(r);
          e.label = c->path;
          f.evidence.push_back(std::move(e));
        }
    ctx.findings.push_back(std::move(f));
  }
  // Files a package lists (pip RECORD) but the image lacks.
  for (const Component* d : ctx.catalog.Find(catalog::ComponentKind::kPythonDist)) {
    if (d->deleted) continue;
    for (const auto& file : d->missing_files) {
      if (file.find(".so") == std::string::npos || !IsCudaFamily(ctx, util::BaseName(file)))
        continue;
      Finding f = ctx.Make("IC012",
                           d->name + " " + d->version + " lists " + file +
                               " in its RECORD but the file is not in the image",
                           {file, d->path}, d->layer);
      f.evidence.push_back(
          {"listed in", d->path + "/RECORD (layer " + std::to_string(d->layer) + ")"});
      f.evidence.push_back({"looked up", file + ": not in the merged tree"});
      ctx.findings.push_back(std::move(f));
    }
  }
}

void CheckMissingSymbols(Context& ctx) {
  for (const auto& seen : ctx.Resolutions()) {
    const auto& r = seen.resolution;
    if (!r.found() || !IsCudaFamily(ctx, r.name)) continue;
    const auto& object = seen.consumer->graph.objects[static_cast<size_t>(seen.object)];
    const elf::ElfInfo* provider = ctx.catalog.Elf(r.real_path);
    if (!object.elf || !provider || !provider->problems.empty() ||
        provider->version_definitions.empty())
      continue;
    std::vector<std::string> missing;
    for (const auto& need : object.elf->version_needs) {
      if (need.file != r.name) continue;
      for (const auto& v : need.versions)
        if (std::find(provider->version_definitions.begin(), provider->version_definitions.end(),
                      v) == provider->version_definitions.end())
          missing.push_back("version `" + v + "'");
    }
    if (missing.empty()) continue;
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 5; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > 5) list += " and " + std::to_string(missing.size() - 5) + " more";
    Finding f = ctx.Make("IC013",
                         object.real_path + " needs " + list + " from " + r.name +
                             ", which resolves to " + r.real_path + " and does not provide it",
                         {r.real_path, object.real_path});
    f.evidence.push_back(ResolvedEvidence(r));
    ctx.findings.push_back(std::move(f));
  }
}

void CheckReplaced(Context& ctx) {
  for (const auto& file : ctx.catalog.replaced) {
    std::string_view name = util::BaseName(file.path);
    if (name.find(".so") == std::string_view::npos) continue;
    std::string family = ctx.FamilyOf(name);
    bool cuda = !family.empty() && family != "driver";
    const catalog::PackageRef& p = file.package;
    bool pip = p.manager == catalog::PackageManager::kPip;
    std::string package = (pip ? "" : std::string(catalog::ManagerName(p.manager)) + " ") + p.name +
                          (p.version.empty() ? "" : " " + p.version);
    std::string record = pip ? "RECORD" : "md5sums";
    // The dist-info directory, or dpkg's md5sums file.
    std::string where = pip ? std::string(util::DirName(p.metadata)) : p.metadata;
    // The catalog keeps only files a later layer than the package's wrote.
    std::string by = " by " + LayerText(ctx, file.layer);
    Finding f = ctx.Make("IC015",
                         file.path + " is not the file " + package + " installed: " + file.found +
                             ", its " + record + " says " + file.stated + "; replaced" + by,
                         {file.path, where}, file.layer);
    if (!cuda) f.severity = Severity::kWarning;
    f.evidence.push_back({"installed by", package + " in " + LayerText(ctx, p.layer)});
    f.evidence.push_back({"stated in", p.metadata});
    f.evidence.push_back({"replaced in", LayerText(ctx, file.layer)});
    ctx.findings.push_back(std::move(f));
    // A cuDNN sub-library of another release under the package's name is skew too.
    if (family == "cudnn" && catalog::LibraryBaseName(name) != "libcudnn") {
      Finding skew = ctx.Make("IC004",
                              file.path + " is a cuDNN sub-library from another release than " +
                                  package + " (it differs from the " + record + ")" + by,
                              {file.path, where}, file.layer);
      skew.evidence.push_back({"installed by", package + " in " + LayerText(ctx, p.layer)});
      ctx.findings.push_back(std::move(skew));
    }
  }
}

// IC016: a distribution whose extension modules load into a framework's process (it requires a
// package of dlopen.json's imports table) pins that framework exactly, and another release is
// installed. Its C++ ABI is the release it was built against: the loader may bind every symbol
// and the operators still fail (torchvision 0.19 on torch 2.5: "Could not run
// 'torchvision::nms' with arguments from the CPU backend").
void CheckFrameworkPin(Context& ctx) {
  std::map<std::string, std::vector<std::string>> modules;  // pip distribution -> its modules
  for (const loader::Consumer& c : ctx.input.session.consumers())
    if (const catalog::PackageRef* owner = ctx.catalog.Owner(c.path);
        c.imported && owner && owner->manager == catalog::PackageManager::kPip)
      modules[owner->name].push_back(c.path);
  for (const auto& [name, paths] : modules) {
    const Component* dist = ctx.Dist(name);
    if (!dist) continue;
    for (const catalog::Requirement& req : dist->requires_dist) {
      std::string pinned = req.Pinned();
      if (pinned.empty() || !req.marker.empty() || !req.under_extras.empty()) continue;
      bool host =
          std::any_of(ctx.knowledge.imports().begin(), ctx.knowledge.imports().end(),
                      [&](const auto& row) { return util::GlobMatch(row.package, req.name); });
      const Component* fw = host ? ctx.Dist(req.name) : nullptr;
      if (!fw || fw->version.empty() || PinHolds(pinned, fw->version)) continue;
      if (ctx.mismatched.count(dist->name)) continue;  // IC013 named this cause already
      auto want = Version::Parse(pinned), have = Version::Parse(fw->version);
      bool same_release = want && have && want->Prefix(2) == have->Prefix(2);
      Finding f = ctx.Make("IC016",
                           dist->name + " " + dist->version + " pins " + req.name + "==" + pinned +
                               " and its extension modules load into " + req.name +
                               "'s process, but the image has " + fw->name + " " + fw->version,
                           {dist->path, fw->path}, std::max(dist->layer, fw->layer));
      if (same_release) f.severity = Severity::kWarning;
      // Only packages known to be built for exactly one release (companions: torchvision's nms
      // fails on another torch though every symbol binds) are an error on the pin alone; for
      // any other the pin is a declaration the files may not bear out (scripts/loader-diff
      // ext25-on-torch26-req imports and runs): IC013 judges its symbols.
      if (!ctx.knowledge.HasCompanions(req.name, catalog::NormalizeDistName(dist->name))) {
        f.severity = Severity::kInfo;
        f.message += " (its symbols bind; no data says it breaks on another release)";
      }
      f.evidence.push_back({"requires", req.raw + " (" + dist->path + "/METADATA)"});
      f.evidence.push_back({"installed", fw->name + " " + fw->version + " (" + fw->path + ", " +
                                             LayerText(ctx, fw->layer) + ")"});
      for (size_t i = 0; i < paths.size() && i < 3; ++i)
        f.evidence.push_back({"extension module", paths[i]});
      f.remediation = "The release that matches the installed " + fw->name + ": " +
                      MatchRelease(ctx, *dist, *fw).fix + ".";
      ctx.findings.push_back(std::move(f));
    }
  }
}

void CheckBrokenLinks(Context& ctx) {
  for (const auto& [path, node] : ctx.tree.nodes()) {
    if (node.type != image::NodeType::kSymlink || path.find(".so") == std::string::npos) continue;
    if (!IsCudaFamily(ctx, util::BaseName(path))) continue;
    auto r = ctx.tree.Resolve(path);
    if (r && r->node) continue;
    std::string why = r ? "its target " + r->path + " does not exist" : "it is a symlink loop";
    int blame = node.layer;
    if (r)
      if (const image::Deletion* d = ctx.tree.FindDeleted(r->path)) {
        why = "its target " + r->path + " was deleted by " + LayerText(ctx, d->layer);
        blame = d->layer;
      }
    Finding f = ctx.Make("IC014", path + " -> " + node.link_target + ": " + why, {path}, blame);
    f.evidence.push_back({"symlink", path + " -> " + node.link_target + " (layer " +
                                         std::to_string(node.layer) + ")"});
    f.evidence.push_back({"resolved", r ? r->path + ": not in the merged tree" : "symlink loop"});
    ctx.findings.push_back(std::move(f));
  }
}

void CheckUnmanaged(Context& ctx) {
  std::map<std::string, std::vector<const Component*>> by_dir;
  for (const auto& c : ctx.catalog.components)
    if (c.kind == catalog::ComponentKind::kCudaLibrary && !c.deleted && !c.owner)
      by_dir[std::string(util::DirName(c.path))].push_back(&c);
  for (const auto& [dir, list] : by_dir) {
    std::vector<std::string> paths;
    std::string names;
    for (const Component* c : list) {
      paths.push_back(c->path);
      if (!names.empty()) names += ", ";
      names += std::string(util::BaseName(c->path));
    }
    Finding f = ctx.Make(
        "IC051",
        std::to_string(list.size()) + " CUDA librar" + (list.size() == 1 ? "y" : "ies") + " in " +
            dir + (list.size() == 1 ? " belongs" : " belong") + " to no package: " + names,
        paths, list[0]->layer);
    for (const Component* c : list) Context::AddComponentEvidence(f, *c, c->name + " ");
    const auto& release = ctx.knowledge.libraries().release_dirs;
    const std::string& where = dir;  // clang 14 lambdas cannot name a binding
    f.quiet = std::any_of(release.begin(), release.end(),
                          [&](const std::string& glob) { return PathGlobMatch(glob, where); });
    if (f.quiet) {
      f.message += " (the layout of an NVIDIA release archive)";
      f.evidence.push_back({"release layout", dir + " (rules/libraries.json release_dirs)"});
    }
    ctx.findings.push_back(std::move(f));
  }
}

void CheckLibraryPath(Context& ctx) {
  auto value = ctx.catalog.config.Env("LD_LIBRARY_PATH");
  if (!value) return;
  std::vector<std::string> problems;
  // Empty and relative elements search wherever the process runs; a missing absolute directory
  // only costs a lookup (scripts/loader-diff cupy11-apt-cuda11-ldlp: a working stack).
  bool cwd = false;
  std::vector<std::string> entries = util::Split(*value, ':');
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    if (e.empty()) {
      problems.push_back("element " + std::to_string(i + 1) + " is empty (the working directory)");
      cwd = true;
    } else if (e[0] != '/') {
      problems.push_back("\"" + e + "\" is relative (to the working directory)");
      cwd = true;
    } else if (!ctx.knowledge.IsContainerMount(util::NormalizePath(e))) {
      auto r = ctx.tree.Resolve(e);
      if (!r || !r->node || r->node->type != image::NodeType::kDirectory)
        problems.push_back("\"" + e + "\" does not exist in the image");
    }
  }
  if (problems.empty()) return;
  std::string list;
  for (const auto& p : problems) list += (list.empty() ? "" : "; ") + p;
  Finding f = ctx.Make("IC060", "LD_LIBRARY_PATH=" + *value + ": " + list, {}, -1);
  if (!cwd) f.severity = Severity::kInfo;
  f.evidence.push_back({"env", "LD_LIBRARY_PATH=" + *value});
  f.env = "LD_LIBRARY_PATH";
  ctx.findings.push_back(std::move(f));
}

// IC062: an LD_PRELOAD or /etc/ld.so.preload entry that resolves to nothing. ld.so prints an
// error in every process and runs it without the object (glibc elf/rtld.c do_preload).
void CheckPreload(Context& ctx) {
  for (const loader::PreloadEntry& e : ctx.input.session.preloads()) {
    const loader::Resolution& r = e.resolution;
    if (r.found()) continue;
    std::string why =
        r.status == loader::Status::kError ? r.error : "cannot open shared object file";
    bool env = e.from == "LD_PRELOAD";
    Finding f = ctx.Make(
        "IC062",
        e.from + " names " + e.entry + ", which " +
            (r.status == loader::Status::kError ? "ld.so cannot load" : "is not in the image") +
            ": every process prints \"ERROR: ld.so: object '" + e.entry + "' from " + e.from +
            " cannot be preloaded (" + why + "): ignored.\" and runs without it",
        {env ? e.entry : e.from}, e.layer);
    if (env) f.env = "LD_PRELOAD";
    f.evidence.push_back({"resolved " + e.entry, UnresolvedText(r)});
    f.remediation = env ? "Install what " + e.entry + " belongs to in the image, or drop it from " +
                              "ENV LD_PRELOAD."
                        : "Install what " + e.entry + " belongs to in the image, or remove it " +
                              "from /etc/ld.so.preload.";
    ctx.findings.push_back(std::move(f));
  }
}

void CheckLdCache(Context& ctx) {
  const auto& cache = ctx.catalog.config.ld_so_cache;
  if (!cache) return;
  const std::string& cache_path = ctx.catalog.config.ld_so_cache_path;
  std::set<std::string> names;
  for (const auto& e : cache->entries) {
    names.insert(e.name);
    if (!IsCudaFamily(ctx, e.name)) continue;
    auto r = ctx.tree.Resolve(e.path);
    if (r && r->node) continue;
    Finding f = ctx.Make(
        "IC061", cache_path + " maps " + e.name + " to " + e.path + ", which is not in the image",
        {e.path, cache_path}, ctx.catalog.config.ld_so_cache_layer);
    f.evidence.push_back({"ld.so.cache", cache_path + " (layer " +
                                             std::to_string(ctx.catalog.config.ld_so_cache_layer) +
                                             ", " + std::to_string(cache->entries.size()) +
                                             " entries)"});
    f.evidence.push_back({"entry", e.name + " -> " + e.path});
    f.evidence.push_back({"looked up", e.path + ": not in the merged tree"});
    ctx.findings.push_back(std::move(f));
  }
  std::vector<std::string> dirs = ctx.input.session.options().platform.default_dirs;
  for (const auto& d : ctx.catalog.config.ld_so_conf.dirs) dirs.push_back(d.dir);
  std::set<std::string> reported;
  for (const auto& dir : dirs) {
    std::string prefix = util::NormalizePath(dir) + "/";
    for (auto it = ctx.catalog.elves().lower_bound(prefix);
         it != ctx.catalog.elves().end() && it->first.starts_with(prefix); ++it) {
      const std::string& soname = it->second.soname;
      if (soname.empty() || it->first.find('/', prefix.size()) != std::string::npos) continue;
      if (!IsCudaFamily(ctx, soname) || names.count(soname) || !reported.insert(soname).second)
        continue;
      const image::Node* n = ctx.tree.Find(it->first);
      Finding f = ctx.Make("IC061",
                           it->first + " (" + soname + ") is in " + dir +
                               ", a loader directory, but " + cache_path +
                               " has no entry for it (ldconfig was not run after it was added)",
                           {it->first, cache_path}, n ? n->layer : -1);
      f.evidence.push_back({"library", it->first + " (SONAME " + soname + ", layer " +
                                           std::to_string(n ? n->layer : -1) + ")"});
      f.evidence.push_back({"loader directory", dir});
      f.evidence.push_back(
          {"ld.so.cache",
           cache_path + " (layer " + std::to_string(ctx.catalog.config.ld_so_cache_layer) + ", " +
               std::to_string(cache->entries.size()) + " entries, none for " + soname + ")"});
      ctx.findings.push_back(std::move(f));
    }
  }
}

}  // namespace

std::vector<Check> LoaderChecks() {
  return {{"IC010", CheckShadowed},
          {"IC011", CheckStale},
          {"IC012", CheckUnresolved},
          {"IC013",
           [](Context& ctx) {
             CheckMissingSymbols(ctx);  // versions a provider lacks
             CheckUnboundSymbols(ctx);  // symbols no object in scope defines
           }},
          {"IC014", CheckBrokenLinks},
          {"IC015", CheckReplaced},
          {"IC016", CheckFrameworkPin},
          {"IC051", CheckUnmanaged},
          {"IC060", CheckLibraryPath},
          {"IC061", CheckLdCache},
          {"IC062", CheckPreload}};
}

}  // namespace imgcheck::rules

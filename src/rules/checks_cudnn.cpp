// Checks over frameworks and cuDNN: IC001-IC004, IC041, IC050.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "rules/context.h"
#include "rules/fixes.h"
#include "util/path.h"

namespace imgcheck::rules {

namespace {

using catalog::Component;

bool Accepts(const AcceptanceRow& rule, const Version& compiled, const Version& loaded) {
  if (loaded.major() != compiled.major()) return false;
  bool at_least = rule.minor_at_least || (rule.minor_at_least_from_major > 0 &&
                                          compiled.major() >= rule.minor_at_least_from_major);
  return at_least ? loaded.minor() >= compiled.minor() : loaded.minor() == compiled.minor();
}

std::string Replace(std::string text, std::string_view key, const std::string& value) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

std::string Format(const Knowledge& k, const Version& v, std::string_view format) {
  if (format == "int") return std::to_string(k.EncodeCudnn(v));
  Version three({v.major(), v.minor(), v.patch()});
  if (format == "tuple")
    return "(" + std::to_string(v.major()) + ", " + std::to_string(v.minor()) + ", " +
           std::to_string(v.patch()) + ")";
  return three.str();
}

// The framework's own error text for this pair of versions.
std::string FrameworkMessage(const Knowledge& k, const std::string& message,
                             std::string_view format, const Version& loaded,
                             const Version& compiled) {
  auto compat = [&](const Version& v) { return std::to_string(k.EncodeCudnn(v) / 100 * 100); };
  std::string m = message;
  m = Replace(m, "{loaded}", Format(k, loaded, format));
  m = Replace(m, "{compiled}", Format(k, compiled, format));
  m = Replace(m, "{compile_version}", Format(k, compiled, format));
  m = Replace(m, "{runtime_version}", Format(k, loaded, format));
  m = Replace(m, "{loaded_int}", std::to_string(k.EncodeCudnn(loaded)));
  m = Replace(m, "{compiled_int}", std::to_string(k.EncodeCudnn(compiled)));
  m = Replace(m, "{loaded_compat}", compat(loaded));
  m = Replace(m, "{compiled_compat}", compat(compiled));
  return m;
}

std::string Title(const Context& ctx, const Component& fw) {
  auto v = ctx.FrameworkVersion(fw);
  return fw.name + (v ? " " + v->str() : "");
}

// Where the compiled versions come from when the image has no build facts file of `fw` (a
// framework known by its distribution): said in the message, since it is not the image's word.
std::string Basis(const Component& fw) {
  if (!fw.build.empty() || !fw.owner || fw.path.empty() || fw.path.back() != '/') return "";
  std::string dist = fw.owner->name + " " + fw.owner->version;
  return AcceptanceKey(fw) == "tensorflow" ? " (from the tested configuration of " + dist + ")"
                                           : " (from the release data of " + dist + ")";
}

void AddResolutionEvidence(Finding& f, const Context::LoadedLibrary& lib) {
  const auto& o = lib.consumer->graph.objects[static_cast<size_t>(lib.index)];
  f.evidence.push_back({"consumer", lib.consumer->path});
  if (lib.how) {
    f.evidence.push_back(ResolvedEvidence(*lib.how));
    if (std::string searched = Context::Searched(*lib.how); !searched.empty())
      f.evidence.push_back({"searched", searched});
  } else {
    f.evidence.push_back({"loaded", o.real_path});
  }
  if (lib.component)
    for (const auto& v : lib.component->versions)
      f.evidence.push_back(
          {"version " + v.value, std::string(catalog::SourceName(v.source)) + ": " + v.path});
}

std::vector<const Component*> Frameworks(const Context& ctx) {
  std::vector<const Component*> out;
  for (const Component* fw : ctx.catalog.Find(catalog::ComponentKind::kFramework))
    if (!fw->deleted) out.push_back(fw);
  return out;
}

void CheckCudnnVersion(Context& ctx) {
  for (const Component* fw : Frameworks(ctx)) {
    auto compiled = CompiledCudnn(ctx, *fw);
    auto version = ctx.FrameworkVersion(*fw);
    if (!compiled || !version) continue;
    const AcceptanceRow* rule = ctx.knowledge.Acceptance(AcceptanceKey(*fw), *version);
    if (!rule) continue;
    for (const auto& lib : ctx.LoadedWithPrefix(ctx.ConsumersOf(*fw), "libcudnn.so.")) {
      auto loaded = ctx.VersionOf(lib.component);
      if (!loaded || Accepts(*rule, compiled->version, *loaded)) continue;
      const std::string& path =
          lib.consumer->graph.objects[static_cast<size_t>(lib.index)].real_path;
      std::string text = FrameworkMessage(ctx.knowledge, rule->message, rule->version_format,
                                          *loaded, compiled->version);
      Finding f = ctx.Make(
          "IC001",
          Title(ctx, *fw) + " was compiled with cuDNN " + compiled->version.str() + Basis(*fw) +
              " but loads cuDNN " + loaded->str() + " from " + path +
              (lib.how ? " (found through " + std::string(loader::ReasonName(lib.how->reason)) + ")"
                       : "") +
              "; its run-time check rejects it: " + text,
          {path, fw->path});
      f.evidence.push_back(
          {"compiled cuDNN", compiled->version.str() + " (" + compiled->how + ")"});
      f.evidence.push_back({"acceptance", fw->name + " " + rule->from.str() + "-" + rule->to.str() +
                                              ": " + rule->source});
      AddResolutionEvidence(f, lib);
      // The install the framework asks for, and the path change when the loader found the
      // other cuDNN through LD_LIBRARY_PATH.
      std::string install = RequiredInstall(ctx, "cudnn", OwningDist(ctx, fw->path));
      std::string env = lib.how && lib.how->reason == loader::Reason::kLdLibraryPath
                            ? EnvWithout(ctx, lib.how->entry)
                            : "";
      if (!install.empty() || !env.empty())
        f.remediation = (install.empty() ? "" : install) +
                        (install.empty() || env.empty() ? "" : ", and ") +
                        (env.empty() ? ""
                                     : env + " (drops " + lib.how->entry + ", where cuDNN " +
                                           loaded->str() + " is found first)") +
                        ".";
      ctx.findings.push_back(std::move(f));
    }
  }
}

void CheckCudaRuntime(Context& ctx) {
  for (const Component* fw : Frameworks(ctx)) {
    auto compiled = CompiledCuda(ctx, *fw);
    if (!compiled) continue;
    for (const auto& lib : ctx.LoadedWithPrefix(ctx.ConsumersOf(*fw), "libcudart.so.")) {
      auto loaded = ctx.VersionOf(lib.component);
      if (!loaded || loaded->Prefix(2) >= compiled->version.Prefix(2)) continue;
      const std::string& path =
          lib.consumer->graph.objects[static_cast<size_t>(lib.index)].real_path;
      Finding f = ctx.Make("IC002",
                           Title(ctx, *fw) + " needs CUDA runtime " +
                               compiled->version.Prefix(2).str() + " or newer" + Basis(*fw) +
                               " but loads libcudart " + loaded->str() + " from " + path,
                           {path, fw->path});
      f.evidence.push_back({"compiled CUDA", compiled->version.str() + " (" + compiled->how + ")"});
      AddResolutionEvidence(f, lib);
      ctx.findings.push_back(std::move(f));
    }
  }
}

// The CUDA major a cuDNN build targets, from its package: libcudnn9-cuda-12, nvidia-cudnn-cu12,
// a dpkg version "8.9.7.29-1+cuda12.2", or (cuDNN 8) the cuBLAS major it links.
std::optional<Known> CudnnCudaMajor(const Context& ctx, const Component& c) {
  auto number_after = [](std::string_view s, std::string_view marker) -> std::optional<int> {
    size_t at = s.rfind(marker);  // "nvidia-cudnn-cu12": the last "-cu"
    if (at == std::string_view::npos) return std::nullopt;
    auto v = Version::Parse(s.substr(at + marker.size()));
    if (!v) return std::nullopt;
    return v->major();
  };
  if (c.owner) {
    for (std::string_view marker : {"-cuda-", "-cu"})
      if (auto m = number_after(c.owner->name, marker))
        return Known{Version({*m}), "package " + c.owner->name};
    if (auto m = number_after(c.owner->version, "+cuda"))
      return Known{Version({*m}), "package version " + c.owner->version};
  }
  for (const auto& e : c.versions)
    if (auto m = number_after(e.detail, "+cuda"))
      return Known{Version({*m}), e.detail + " (" + e.path + ")"};
  if (c.elf)
    for (const auto& n : c.elf->needed)
      if (n.starts_with("libcublas"))
        if (size_t so = n.find(".so."); so != std::string::npos)
          if (auto v = Version::Parse(n.substr(so + 4)); v && v->major() >= 10)
            return Known{Version({v->major()}), "links " + n};
  (void)ctx;
  return std::nullopt;
}

// The CUDA major of the runtime in a consumer's link map.
std::optional<Known> RuntimeCudaMajor(const Context& ctx, const Consumer& consumer) {
  for (const auto& lib : ctx.LoadedWithPrefix({&consumer}, "libcudart.so.")) {
    if (auto v = ctx.VersionOf(lib.component, 1))
      return Known{Version({v->major()}), "libcudart " + v->str()};
    const auto& o = consumer.graph.objects[static_cast<size_t>(lib.index)];
    std::string soname = o.elf ? o.elf->soname : "";
    if (auto v = Version::Parse(
            soname.substr(std::min(soname.size(), std::string("libcudart.so.").size()))))
      return Known{Version({v->major()}), soname + " (" + o.real_path + ")"};
  }
  return std::nullopt;
}

void CheckCudnnCuda(Context& ctx) {
  std::set<std::string> reported;
  for (const Consumer* consumer : ctx.AllConsumers()) {
    auto runtime = RuntimeCudaMajor(ctx, *consumer);
    if (!runtime) continue;
    for (const auto& lib : ctx.LoadedWithPrefix({consumer}, "libcudnn.so.")) {
      if (!lib.component || reported.count(lib.component->path)) continue;
      auto built = CudnnCudaMajor(ctx, *lib.component);
      std::string why;
      if (built && built->version.major() != runtime->version.major()) {
        why = "was built for CUDA " + built->version.str() + " (" + built->how + ")";
      } else if (!built) {
        auto v = ctx.VersionOf(lib.component);
        const CudnnReleaseRow* row = v ? ctx.knowledge.CudnnRelease(*v) : nullptr;
        if (!row ||
            std::count(row->cuda_majors.begin(), row->cuda_majors.end(), runtime->version.major()))
          continue;
        why = "has no build for CUDA " + runtime->version.str() + " (" + row->source + ")";
      } else {
        continue;
      }
      reported.insert(lib.component->path);
      Finding f = ctx.Make("IC003",
                           "cuDNN " + lib.component->version + " at " + lib.component->path + " " +
                               why + " but runs with the CUDA " + runtime->version.str() +
                               " runtime (" + runtime->how + ") in " + consumer->path,
                           {lib.component->path, consumer->path});
      AddResolutionEvidence(f, lib);
      ctx.findings.push_back(std::move(f));
    }
  }
}

void CheckSublibrarySkew(Context& ctx) {
  for (const auto& seen : ctx.Resolutions()) {
    const auto& shim = seen.consumer->graph.objects[static_cast<size_t>(seen.object)];
    const auto& r = seen.resolution;
    if (!shim.elf || !shim.elf->soname.starts_with("libcudnn.so.") || !r.found()) continue;
    if (ctx.FamilyOf(r.name) != "cudnn" || r.name.starts_with("libcudnn.so.")) continue;
    const Component* main = ctx.LibraryAt(shim.real_path);
    const Component* sub = ctx.LibraryAt(r.real_path);
    auto mv = ctx.VersionOf(main), sv = ctx.VersionOf(sub);
    bool same_dir = util::DirName(shim.real_path) == util::DirName(r.real_path);
    bool differ = (mv && sv && *mv != *sv);
    auto owner = [](const Component* c) {
      return c && c->owner ? std::string(catalog::ManagerName(c->owner->manager)) + ":" +
                                 c->owner->name + " " + c->owner->version
                           : std::string("unmanaged");
    };
    if (!differ && !(!same_dir && owner(main) != owner(sub) && !(mv && sv && *mv == *sv))) continue;
    std::string what =
        differ ? "cuDNN " + sv->str() + " while libcudnn is " + mv->str()
               : "another install (" + owner(sub) + ") than libcudnn (" + owner(main) + ")";
    Finding f = ctx.Make("IC004",
                         "libcudnn at " + shim.real_path + " loads its sub-library " + r.name +
                             " from " + r.real_path + ", " + what +
                             "; cuDNN requires all its sub-libraries to be the same version",
                         {r.real_path, shim.real_path});
    f.evidence.push_back({"consumer", seen.consumer->path});
    f.evidence.push_back(ResolvedEvidence(r));
    // The other release's sub-library goes: its package, or the file and the path entry that
    // leads to it; libcudnn then finds its own beside it.
    std::string env = r.reason == loader::Reason::kLdLibraryPath ? EnvWithout(ctx, r.entry) : "";
    f.remediation =
        (sub && sub->owner
             ? RemoveOr(ctx, *sub->owner, "it installed " + r.real_path,
                        "take " + std::string(util::DirName(r.real_path)) + " off the loader path")
             : "delete " + r.real_path) +
        (env.empty() ? "" : ", or " + env + " (drops " + r.entry + ")") + ", so that " +
        std::string(util::BaseName(shim.real_path)) + " loads the " + r.name +
        " of its own release.";
    f.remediation[0] =
        static_cast<char>(std::toupper(static_cast<unsigned char>(f.remediation[0])));
    ctx.findings.push_back(std::move(f));
  }
}

void CheckCudnnGpu(Context& ctx) {
  if (!ctx.input.target.sm) return;
  int sm = *ctx.input.target.sm;
  std::set<std::string> reported;
  // PyTorch's own floor first: it is the message users will see.
  for (const Component* fw : Frameworks(ctx)) {
    for (const auto& lib : ctx.LoadedWithPrefix(ctx.ConsumersOf(*fw), "libcudnn.so.")) {
      auto v = ctx.VersionOf(lib.component);
      const SmFloorRow* floor = v ? ctx.knowledge.SmFloor(AcceptanceKey(*fw), *v) : nullptr;
      if (!floor || sm >= floor->min_sm || !reported.insert(lib.component->path).second) continue;
      std::string text =
          Replace(floor->message, "{loaded_int}", std::to_string(ctx.knowledge.EncodeCudnn(*v)));
      Finding f = ctx.Make("IC041",
                           Title(ctx, *fw) + " loads cuDNN " + v->str() + " (" +
                               lib.component->path + "), which it refuses on GPUs below SM " +
                               std::to_string(floor->min_sm) + "; the target GPU is sm_" +
                               std::to_string(sm) + " (" + ctx.input.target.gpu_from + "): " + text,
                           {lib.component->path, fw->path});
      f.evidence.push_back({"rule", floor->source});
      ctx.findings.push_back(std::move(f));
    }
  }
  for (const Component* c : ctx.catalog.Family("cudnn")) {
    if (c->name != "libcudnn" || reported.count(c->path)) continue;
    auto v = ctx.VersionOf(c);
    const CudnnReleaseRow* row = v ? ctx.knowledge.CudnnRelease(*v) : nullptr;
    if (!row || sm >= row->min_sm) continue;
    Finding f = ctx.Make("IC041",
                         "cuDNN " + v->str() + " at " + c->path + " supports GPUs from SM " +
                             std::to_string(row->min_sm) + " (" +
                             ctx.knowledge.ArchName(row->min_sm) + "); the target GPU is sm_" +
                             std::to_string(sm) + " (" + ctx.input.target.gpu_from + ")",
                         {c->path});
    f.evidence.push_back({"support matrix", row->source});
    ctx.findings.push_back(std::move(f));
  }
}

void CheckMultipleCudnn(Context& ctx) {
  std::vector<const Component*> shims;
  // A copy a distribution vendors for itself is its package's, not another installation.
  for (const Component* c : ctx.catalog.Family("cudnn"))
    if (c->name == "libcudnn" && !ctx.VendoredOnly(*c)) shims.push_back(c);
  if (shims.size() < 2) return;
  std::set<std::string> versions, managers;
  for (const Component* c : shims) {
    versions.insert(c->version.empty() ? "?" : c->version);
    managers.insert(c->owner ? std::string(catalog::ManagerName(c->owner->manager)) : "unmanaged");
  }
  if (versions.size() < 2 && managers.size() < 2) return;
  std::vector<std::string> paths;
  std::string list;
  for (const Component* c : shims) {
    paths.push_back(c->path);
    if (!list.empty()) list += ", ";
    list += c->path + " (" + (c->version.empty() ? "version unknown" : c->version) + ", " +
            (c->owner ? std::string(catalog::ManagerName(c->owner->manager)) + " " + c->owner->name
                      : "unmanaged") +
            ")";
  }
  Finding f =
      ctx.Make("IC050", std::to_string(shims.size()) + " cuDNN installations: " + list, paths);
  for (size_t i = 0; i < shims.size(); ++i)
    Context::AddComponentEvidence(f, *shims[i], "cuDNN " + std::to_string(i + 1) + " ");
  ctx.findings.push_back(std::move(f));
}

}  // namespace

std::vector<Check> CudnnChecks() {
  return {{"IC001", CheckCudnnVersion}, {"IC002", CheckCudaRuntime},
          {"IC003", CheckCudnnCuda},    {"IC004", CheckSublibrarySkew},
          {"IC041", CheckCudnnGpu},     {"IC050", CheckMultipleCudnn}};
}

}  // namespace imgcheck::rules

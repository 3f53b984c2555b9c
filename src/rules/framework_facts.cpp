// What a framework was built with: its compiled cuDNN and CUDA, from its build file, its pip
// pins, or the release tables of rules/frameworks.json.
#include "rules/context.h"

namespace imgcheck::rules {

using catalog::Component;

std::string AcceptanceKey(const Component& fw) {
  if (fw.name == "torch") return "torch";
  if (fw.name.starts_with("tensorflow")) return "tensorflow";
  if (fw.name.starts_with("jax-cuda")) return "jax";
  return "";
}

namespace {

// The row of the plugin's release (its from..to holds the version), else its row without a
// range.
const JaxPluginRow* JaxPlugin(const Context& ctx, const Component& fw) {
  auto version = ctx.FrameworkVersion(fw);
  const JaxPluginRow* fallback = nullptr;
  for (const auto& r : ctx.knowledge.jax_plugins()) {
    if (r.plugin != fw.name) continue;
    if (r.from.size() == 0) {
      if (!fallback) fallback = &r;
    } else if (version && r.from <= *version && *version <= r.to) {
      return &r;
    }
  }
  return fallback;
}

std::optional<Version> BuildFact(const Component& fw, std::string_view key) {
  auto it = fw.build.find(key);
  if (it == fw.build.end()) return std::nullopt;
  return Version::Parse(it->second);
}

}  // namespace

std::optional<Known> CompiledCudnn(const Context& ctx, const Component& fw) {
  auto version = ctx.FrameworkVersion(fw);
  std::string key = AcceptanceKey(fw);
  if (key == "torch") {
    if (auto v = BuildFact(fw, "cudnn"); v && v->size() >= 2)
      return Known{*v, "cudnn in " + fw.path};
    if (const Component* dist = ctx.Dist(fw.owner ? fw.owner->name : "torch"))
      for (const auto& req : dist->requires_dist)
        if (req.name.starts_with("nvidia-cudnn-cu"))
          if (auto v = Version::Parse(req.Pinned()))
            return Known{*v, "Requires-Dist " + req.raw + " (" + dist->path + ")"};
    auto cuda = BuildFact(fw, "cuda");
    if (version && cuda)
      if (const TorchBuildRow* row = ctx.knowledge.TorchBuild(*version, *cuda))
        return Known{row->cudnn, "PyTorch " + row->torch.str() + " CUDA " + row->cuda.str() +
                                     " release matrix (" + row->source + ")"};
  } else if (key == "tensorflow") {
    auto fact = BuildFact(fw, "cudnn_version");
    const TensorflowBuildRow* row = version ? ctx.knowledge.TensorflowBuild(*version) : nullptr;
    // build_info often states only the major ("9"); the tested configuration is more precise.
    if (row && (!fact || (fact->size() < 2 && fact->major() == row->cudnn.major())))
      return Known{row->cudnn, "TensorFlow " + row->tensorflow.str() +
                                   " tested build configuration (" + row->source + ")"};
    if (fact && fact->size() >= 2) return Known{*fact, "cudnn_version in " + fw.path};
  } else if (key == "jax") {
    if (const JaxPluginRow* row = JaxPlugin(ctx, fw))
      return Known{row->built_cudnn, fw.name + " build (" + row->source + ")"};
  }
  return std::nullopt;
}

std::optional<Known> CompiledCuda(const Context& ctx, const Component& fw) {
  std::string key = AcceptanceKey(fw);
  if (key == "torch") {
    if (auto v = BuildFact(fw, "cuda"); v && v->size() >= 2) return Known{*v, "cuda in " + fw.path};
  } else if (key == "tensorflow") {
    if (auto v = BuildFact(fw, "cuda_version"); v && v->size() >= 2)
      return Known{*v, "cuda_version in " + fw.path};
    auto version = ctx.FrameworkVersion(fw);
    if (const TensorflowBuildRow* row = version ? ctx.knowledge.TensorflowBuild(*version) : nullptr)
      return Known{row->cuda,
                   "TensorFlow " + row->tensorflow.str() + " tested build configuration"};
  } else if (key == "jax") {
    if (const JaxPluginRow* row = JaxPlugin(ctx, fw))
      return Known{row->min_cuda, fw.name + " minimum CUDA (" + row->source + ")"};
  }
  return std::nullopt;
}

std::vector<std::pair<Known, std::string>> CudaNeeds(const Context& ctx) {
  std::vector<std::pair<Known, std::string>> out;
  for (const Component* c : ctx.catalog.Family("cudart"))
    if (auto v = ctx.VersionOf(c); v && c->name == "libcudart")
      out.push_back({Known{*v, "libcudart " + v->str()}, c->path});
  for (const Component* fw : ctx.catalog.Find(catalog::ComponentKind::kFramework))
    if (!fw->deleted)
      if (auto k = CompiledCuda(ctx, *fw)) out.push_back({*k, fw->path});
  for (const Component* t : ctx.catalog.Find(catalog::ComponentKind::kCudaToolkit))
    if (auto v = ctx.VersionOf(t); v && !t->deleted)
      out.push_back({Known{*v, "CUDA toolkit " + v->str()}, t->path});
  return out;
}

}  // namespace imgcheck::rules

// IC080: the image holds a release newer than the newest the rule data knows. The checks of
// such a component fall back to an older row (or to the component's own build files only);
// saying so, and naming that row, keeps the judgement from being silent.
#include "rules/context.h"

namespace imgcheck::rules {

namespace {

using catalog::Component;
using catalog::ComponentKind;

// Versions compare at the precision of the table: torch and TensorFlow rows are per minor,
// CUDA per minor, cuDNN per patch, jax plugins per release.
size_t Precision(std::string_view what) {
  if (what == "torch" || what == "tensorflow" || what == "cuda") return 2;
  if (what == "cudnn") return 3;
  return 8;
}

void Report(Context& ctx, std::string_view what, const std::string& label, const Version& version,
            const std::string& path, std::string_view fallback) {
  auto known = ctx.knowledge.NewestKnown(what);
  size_t n = Precision(what);
  if (!known || version.Prefix(n) <= known->version.Prefix(n)) return;
  Finding f = ctx.Make(
      "IC080",
      label + " " + version.str() + " is newer than the newest release the rule data knows (" +
          known->version.str() + ", rules data " + ctx.knowledge.version().str() +
          "): its checks used " + std::string(fallback.empty() ? known->row : fallback) +
          "; run `imgcheck rules update` for newer data",
      {path});
  f.evidence.push_back({"newest known", known->version.str() + ": " + known->row});
  f.evidence.push_back({"rules data", ctx.knowledge.version().str()});
  ctx.findings.push_back(std::move(f));
}

void CheckDataOutdated(Context& ctx) {
  for (const Component* fw : ctx.catalog.Find(ComponentKind::kFramework)) {
    auto version = ctx.FrameworkVersion(*fw);
    if (fw->deleted || !version) continue;
    std::string key = AcceptanceKey(*fw);
    if (key == "torch" || key == "tensorflow") {
      // No row matches a newer release: only its build file and pins speak for it.
      Report(ctx, key, fw->name, *version, fw->path,
             "only " + fw->name + "'s own build file and pip pins (no row describes it)");
    } else if (key == "jax") {
      Report(ctx, fw->name, fw->name, *version, fw->path, "");
    }
  }
  for (const Component* c : ctx.catalog.Family("cudart"))
    if (auto v = ctx.VersionOf(c); v && c->name == "libcudart" && !c->deleted)
      Report(ctx, "cuda", "the CUDA runtime", *v, c->path, "");
  for (const Component* c : ctx.catalog.Family("cudnn"))
    if (auto v = ctx.VersionOf(c, 3); v && c->name == "libcudnn" && !c->deleted) {
      const CudnnReleaseRow* row = ctx.knowledge.CudnnRelease(*v);
      Report(ctx, "cudnn", "cuDNN", *v, c->path,
             row ? "cudnn_releases row " + row->from.str() + ".." + row->to.str() + " (" +
                       row->source + ")"
                 : "no cudnn_releases row");
    }
}

}  // namespace

std::vector<Check> DataChecks() { return {{"IC080", CheckDataOutdated}}; }

}  // namespace imgcheck::rules

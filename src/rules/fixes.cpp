#include "rules/fixes.h"

#include <algorithm>

#include "catalog/metadata.h"
#include "util/path.h"

namespace imgcheck::rules {

std::string JoinAnd(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

std::string EnvWithout(const Context& ctx, const std::string& dir) {
  auto value = ctx.catalog.config.Env("LD_LIBRARY_PATH");
  if (!value) return "";
  std::string kept;
  bool dropped = false;
  for (const auto& e : util::Split(*value, ':')) {
    if (!e.empty() && util::NormalizePath(e) == util::NormalizePath(dir)) {
      dropped = true;
      continue;
    }
    kept += (kept.empty() ? "" : ":") + e;
  }
  return dropped ? "ENV LD_LIBRARY_PATH=" + kept : "";
}

const catalog::Component* OwningDist(const Context& ctx, const std::string& path) {
  const catalog::PackageRef* owner = ctx.catalog.Owner(path);
  return owner && owner->manager == catalog::PackageManager::kPip ? ctx.Dist(owner->name) : nullptr;
}

std::string RequiredInstall(const Context& ctx, const std::string& family,
                            const catalog::Component* dist) {
  if (!dist) return "";
  for (const auto& f : ctx.knowledge.libraries().families) {
    if (f.family != family) continue;
    for (const auto& req : dist->requires_dist)
      for (const auto& glob : f.pip)
        if (util::GlobMatch(glob, req.name))
          return "pip install '" + req.name + req.specifier + "' (what " + dist->name + " " +
                 dist->version + " requires" + (req.marker.empty() ? "" : " when " + req.marker) +
                 ")";
  }
  return "";
}

namespace {

// True when some installed distribution asks `dist` for one of `extras` ("cuda-toolkit[cublas]").
bool ExtraAsked(const Context& ctx, const catalog::Component& dist,
                const std::vector<std::string>& extras) {
  for (const catalog::Component* other : ctx.catalog.Find(catalog::ComponentKind::kPythonDist)) {
    if (other->deleted) continue;
    for (const catalog::Requirement& req : other->requires_dist)
      if (req.name == dist.name)
        for (const std::string& extra : req.extras)
          if (std::find(extras.begin(), extras.end(), extra) != extras.end()) return true;
  }
  return false;
}

}  // namespace

std::optional<Requirer> RequiredBy(const Context& ctx, const catalog::PackageRef& owner) {
  if (owner.manager != catalog::PackageManager::kPip) return std::nullopt;
  const std::string name = catalog::NormalizeDistName(owner.name);
  for (const catalog::Component* dist : ctx.catalog.Find(catalog::ComponentKind::kPythonDist)) {
    if (dist->deleted) continue;
    for (const catalog::Requirement& req : dist->requires_dist)
      // A requirement under an extra holds only when someone asked for that extra (PEP 508).
      if (req.name == name &&
          (req.under_extras.empty() || ExtraAsked(ctx, *dist, req.under_extras)))
        return Requirer{dist, &req};
  }
  return std::nullopt;
}

std::string RemoveOr(const Context& ctx, const catalog::PackageRef& owner, const std::string& why,
                     const std::string& instead) {
  if (std::optional<Requirer> by = RequiredBy(ctx, owner))
    return "keep " + owner.name + ", which " + by->dist->name + " " + by->dist->version +
           " requires (" + by->requirement->name + by->requirement->specifier + "), and " + instead;
  switch (owner.manager) {
    case catalog::PackageManager::kDpkg:
      return "apt-get remove " + owner.name + " (" + why + ")";
    case catalog::PackageManager::kPip:
      return "pip uninstall " + owner.name + " (" + why + ")";
    case catalog::PackageManager::kConda:
      return "conda remove " + owner.name + " (" + why + ")";
  }
  return "";
}

}  // namespace imgcheck::rules

#include "rules/fixes.h"

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

std::string RemoveCommand(const catalog::PackageRef& owner) {
  switch (owner.manager) {
    case catalog::PackageManager::kDpkg:
      return "apt-get remove " + owner.name;
    case catalog::PackageManager::kPip:
      return "pip uninstall " + owner.name;
    case catalog::PackageManager::kConda:
      return "conda remove " + owner.name;
  }
  return "";
}

}  // namespace imgcheck::rules

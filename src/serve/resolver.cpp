#include "serve/resolver.h"

#include <algorithm>

#include "image/registry_reference.h"

namespace imgcheck::serve {

namespace {

constexpr size_t kMaxCacheEntries = 100000;  // bounds memory against a flood of distinct names

}  // namespace

Resolver::Resolver(image::LoadOptions load, std::vector<std::string> allow,
                   std::chrono::seconds tag_ttl, ManifestResolver fetch)
    : load_(std::move(load)),
      allow_(std::move(allow)),
      tag_ttl_(tag_ttl),
      fetch_(std::move(fetch)) {}

bool Resolver::Allowed(const std::string& host) const {
  return allow_.empty() || std::find(allow_.begin(), allow_.end(), host) != allow_.end();
}

util::Expected<Resolved> Resolver::Resolve(const std::string& reference,
                                           const std::string& platform) {
  auto ref = image::ParseReference(reference);
  if (!ref) return util::MakeError("image '" + reference + "': " + ref.error().message);
  if (!Allowed(ref->domain))
    return util::MakeError("image '" + reference + "': registry " + ref->domain +
                           " is not in --allow-registry");
  std::string key = ref->String() + " " + platform;
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end() && now < it->second.expires)
      return it->second.resolved;
  }
  image::LoadOptions o = load_;
  o.platform = platform;
  Resolved r;
  r.host = ref->domain;
  try {
    r.digest = fetch_("docker://" + ref->String(), o);
  } catch (const std::exception& e) {
    return util::MakeError("image '" + reference + "': " + e.what());
  }
  r.pinned = "docker://" + ref->domain + "/" + ref->path + "@" + r.digest;
  std::lock_guard lock(mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_[key] = {
      r, ref->digest.empty() ? now + tag_ttl_ : std::chrono::steady_clock::time_point::max()};
  return r;
}

}  // namespace imgcheck::serve

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
  std::promise<util::Expected<Resolved>> mine;
  std::shared_future<util::Expected<Resolved>> theirs;
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end() && std::chrono::steady_clock::now() < it->second.expires)
      return it->second.resolved;
    if (auto p = pending_.find(key); p != pending_.end())
      theirs = p->second;
    else
      pending_[key] = mine.get_future().share();
  }
  if (theirs.valid()) return theirs.get();
  image::LoadOptions o = load_;
  o.platform = platform;
  util::Expected<Resolved> result = util::MakeError("");
  try {
    Resolved r;
    r.host = ref->domain;
    r.digest = fetch_("docker://" + ref->String(), o);
    r.pinned = "docker://" + ref->domain + "/" + ref->path + "@" + r.digest;
    result = r;
  } catch (const std::exception& e) {
    result = util::MakeError("image '" + reference + "': " + e.what());
  }
  std::lock_guard lock(mu_);
  if (result) {
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    auto now = std::chrono::steady_clock::now();
    cache_[key] = {*result, ref->digest.empty() ? now + tag_ttl_
                                                : std::chrono::steady_clock::time_point::max()};
  }
  mine.set_value(result);
  pending_.erase(key);
  return result;
}

}  // namespace imgcheck::serve

#include "serve/fleet/resolver.h"

#include <algorithm>
#include <future>
#include <map>
#include <mutex>

#include "image/registry_http.h"

namespace imgcheck::serve::fleet {

namespace {

constexpr size_t kMaxCacheEntries = 100000;  // bounds memory against a flood of distinct names
constexpr int kLookupThreads = 8;            // registry round trips at once, for all requests
constexpr size_t kLookupQueue = 1024;        // lookups waiting for one; more are refused
constexpr std::chrono::milliseconds kStopCheck{50};  // how soon a waiting Resolve sees Stop
constexpr size_t kKeptManifests = 64;                // for scans to come (TakeManifest)
constexpr size_t kKeptManifestBytes = 1 << 20;       // larger ones are fetched again

}  // namespace

struct Resolver::State {
  State(image::LoadOptions l, std::chrono::seconds ttl, ManifestResolver f)
      : load(std::move(l)), tag_ttl(ttl), fetch(std::move(f)) {}
  image::LoadOptions load;
  std::chrono::seconds tag_ttl;
  ManifestResolver fetch;
  std::mutex mu;
  struct Entry {
    Resolved resolved;
    std::chrono::steady_clock::time_point expires;
  };
  std::map<std::string, Entry> cache;  ///< by reference + " " + platform
  /// Lookups under way: concurrent askers for one new tag share one registry round trip.
  std::map<std::string, std::shared_future<util::Expected<Resolved>>> pending;
  std::map<std::string, std::promise<util::Expected<Resolved>>> promises;
  /// Manifests fetched by lookups, by Resolved::pinned, until a scan takes them.
  std::map<std::string, std::shared_ptr<const image::KnownManifest>> manifests;
};

Resolver::Resolver(image::LoadOptions load, std::vector<std::string> allow,
                   std::chrono::seconds tag_ttl, ManifestResolver fetch)
    : allow_(std::move(allow)),
      state_(std::make_shared<State>(std::move(load), tag_ttl, std::move(fetch))),
      lookups_(kLookupThreads, kLookupQueue) {
  // Every lookup of a registry reuses its connections for the server's lifetime.
  if (!state_->load.registry.connections)
    state_->load.registry.connections = std::make_shared<image::ConnectionShares>();
}

std::shared_ptr<const image::KnownManifest> Resolver::TakeManifest(const std::string& pinned) {
  std::lock_guard lock(state_->mu);
  auto it = state_->manifests.find(pinned);
  if (it == state_->manifests.end()) return nullptr;
  auto manifest = std::move(it->second);
  state_->manifests.erase(it);
  return manifest;
}

bool Resolver::Allowed(const std::string& host) const {
  return allow_.empty() || std::find(allow_.begin(), allow_.end(), host) != allow_.end();
}

util::Expected<Resolved> Resolver::Resolve(const std::string& reference,
                                           const std::string& platform,
                                           std::chrono::steady_clock::time_point deadline) {
  auto ref = image::ParseReference(reference);
  if (!ref) return util::MakeError("image '" + reference + "': " + ref.error().message);
  if (!Allowed(ref->domain))
    return util::MakeError("image '" + reference + "': registry " + ref->domain +
                           " is not in --allow-registry");
  std::string key = ref->String() + " " + platform;
  std::shared_future<util::Expected<Resolved>> answer;
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->cache.find(key);
    if (it != state_->cache.end() && std::chrono::steady_clock::now() < it->second.expires)
      return it->second.resolved;
    if (auto p = state_->pending.find(key); p != state_->pending.end()) {
      answer = p->second;
    } else {
      bool queued = lookups_.Submit([state = state_, key, reference, platform, r = *ref] {
        Lookup(state, key, reference, platform, r);
      });
      if (!queued)
        return util::MakeError("image '" + reference + "': too many registry lookups waiting");
      answer = state_->pending[key] = state_->promises[key].get_future().share();
    }
  }
  // In slices, so that Stop ends the wait too.
  while (answer.wait_until(std::min(deadline, std::chrono::steady_clock::now() + kStopCheck)) !=
         std::future_status::ready) {
    if (stopping_)
      return util::MakeError("image '" + reference +
                             "': not resolved, the server is shutting down");
    if (std::chrono::steady_clock::now() >= deadline)
      return util::MakeError("image '" + reference + "': the registry did not answer in time");
  }
  return answer.get();
}

void Resolver::Lookup(const std::shared_ptr<State>& state, const std::string& key,
                      const std::string& reference, const std::string& platform,
                      const image::Reference& ref) {
  image::LoadOptions o = state->load;
  o.platform = platform;
  util::Expected<Resolved> result = util::MakeError("");
  std::shared_ptr<image::KnownManifest> manifest;
  try {
    manifest = std::make_shared<image::KnownManifest>(state->fetch("docker://" + ref.String(), o));
    Resolved r;
    r.host = ref.domain;
    r.digest = manifest->digest;
    r.pinned = "docker://" + ref.domain + "/" + ref.path + "@" + r.digest;
    result = r;
  } catch (const std::exception& e) {
    result = util::MakeError("image '" + reference + "': " + e.what());
  }
  std::lock_guard lock(state->mu);
  if (result) {
    if (state->cache.size() >= kMaxCacheEntries) state->cache.clear();
    auto now = std::chrono::steady_clock::now();
    state->cache[key] = {*result, ref.digest.empty()
                                      ? now + state->tag_ttl
                                      : std::chrono::steady_clock::time_point::max()};
    if (manifest->bytes.size() <= kKeptManifestBytes) {
      if (state->manifests.size() >= kKeptManifests)
        state->manifests.erase(state->manifests.begin());
      state->manifests[result->pinned] = std::move(manifest);
    }
  }
  state->promises[key].set_value(result);
  state->promises.erase(key);
  state->pending.erase(key);
}

}  // namespace imgcheck::serve::fleet

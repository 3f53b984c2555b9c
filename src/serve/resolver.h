// Image references from pod specs and events -> the manifest digest a node would pull, for the
// registries the operator allows. Digests are immutable, so what a digest resolves to is kept
// for good; what a tag resolves to is kept for a short while (tags move).
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "image/image.h"
#include "util/error.h"

namespace imgcheck::serve {

struct Resolved {
  std::string digest;  ///< the platform's image manifest digest
  std::string pinned;  ///< "docker://host/repo@digest": what a scan reads
  std::string host;    ///< the registry (domain[:port]) the reference names
};

/// reference -> digest over the registry (image::ResolveRegistryManifest in production).
using ManifestResolver =
    std::function<std::string(const std::string& reference, const image::LoadOptions& options)>;

class Resolver {
 public:
  /// `allow`: registries (HOST[:PORT], "docker.io" for Docker Hub) that may be contacted; empty
  /// allows any.
  Resolver(image::LoadOptions load, std::vector<std::string> allow, std::chrono::seconds tag_ttl,
           ManifestResolver fetch = image::ResolveRegistryManifest);

  /// Throws nothing: a reference that is malformed, not allowed or not resolvable is an error.
  util::Expected<Resolved> Resolve(const std::string& reference, const std::string& platform);
  /// True when `host` may be contacted.
  bool Allowed(const std::string& host) const;

 private:
  image::LoadOptions load_;
  std::vector<std::string> allow_;
  std::chrono::seconds tag_ttl_;
  ManifestResolver fetch_;
  std::mutex mu_;
  struct Entry {
    Resolved resolved;
    std::chrono::steady_clock::time_point expires;
  };
  std::map<std::string, Entry> cache_;  ///< by reference + " " + platform
  /// Lookups under way: concurrent askers for one new tag share one registry round trip.
  std::map<std::string, std::shared_future<util::Expected<Resolved>>> pending_;
};

}  // namespace imgcheck::serve

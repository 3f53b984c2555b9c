// Image references from pod specs and events -> the manifest digest a node would pull, for the
// registries the operator allows. Digests are immutable, so what a digest resolves to is kept
// for good; what a tag resolves to is kept for a short while (tags move).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "image/image.h"
#include "image/registry_reference.h"
#include "serve/pool.h"
#include "util/error.h"

namespace imgcheck::serve::fleet {

struct Resolved {
  std::string digest;  ///< the platform's image manifest digest
  std::string pinned;  ///< "docker://host/repo@digest": what a scan reads
  std::string host;    ///< the registry (domain[:port]) the reference names
};

/// reference -> the platform's image manifest over the registry, verified, with its digest
/// (image::ResolveRegistryManifest in production).
using ManifestResolver = std::function<image::KnownManifest(const std::string& reference,
                                                            const image::LoadOptions& options)>;

class Resolver {
 public:
  /// `allow`: registries (HOST[:PORT], "docker.io" for Docker Hub) that may be contacted; empty
  /// allows any.
  Resolver(image::LoadOptions load, std::vector<std::string> allow, std::chrono::seconds tag_ttl,
           ManifestResolver fetch = image::ResolveRegistryManifest);

  /// Throws nothing: a reference that is malformed, not allowed or not resolvable is an error,
  /// and so is one the registry has not answered for by `deadline` (the lookup goes on, for the
  /// next asker).
  util::Expected<Resolved> Resolve(const std::string& reference, const std::string& platform,
                                   std::chrono::steady_clock::time_point deadline =
                                       std::chrono::steady_clock::time_point::max());
  /// The image manifest a lookup fetched to resolve `pinned` (Resolved::pinned), handed over
  /// once, so that the scan of `pinned` does not fetch it again (LoadOptions::known_manifest);
  /// null when none is kept (the resolution came from the cache, or it was handed over or
  /// dropped: a few recent ones are kept, small ones only).
  std::shared_ptr<const image::KnownManifest> TakeManifest(const std::string& pinned);
  /// True when `host` may be contacted.
  bool Allowed(const std::string& host) const;
  /// Shutdown: Resolve waits no more (it answers "the server is shutting down" within 50 ms);
  /// the lookups under way go on to their own deadlines.
  void Stop() { stopping_ = true; }

 private:
  /// What lookups share with the resolver. Lookups run on a pool of a few threads (shared by
  /// every request; a request naming 2,000 tags queues 2,000 lookups, not threads), each
  /// holding the state, so a stalled registry holds neither a request past its deadline nor
  /// the server's shutdown.
  struct State;
  static void Lookup(const std::shared_ptr<State>& state, const std::string& key,
                     const std::string& reference, const std::string& platform,
                     const image::Reference& ref);

  std::vector<std::string> allow_;
  std::atomic<bool> stopping_{false};
  std::shared_ptr<State> state_;
  Pool lookups_;
};

}  // namespace imgcheck::serve::fleet

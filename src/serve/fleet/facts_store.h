// The facts store (issue 33): what a verdict needs from an image, its layers' readings and its
// config, kept once in Redis for every replica, so that a new policy re-judges an image from
// them with no registry traffic but the manifest (Clair indexes once per manifest; Harbor and
// Trivy Operator pull again). Readings are keyed by what made them (image::LayerKey: the
// extractor's version, the capture policy), so only a new extractor needs the blobs again.
//
// Entries are sealed like the verdicts (VerdictSeal over the store key and the value): one
// written by someone without the key is refused and counted, never judged from. Redis is
// untrusted beyond that: a value is read with a bound (GETRANGE), and the entries are bounded in
// total, the least recently used evicted first (one script, so replicas keep one account).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "image/layer_cache.h"
#include "serve/fleet/redis_client.h"
#include "serve/metrics.h"
#include "serve/trust/trust.h"

namespace imgcheck::serve::fleet {

/// The largest value kept: a reading of a CUDA layer of gigabytes is a few megabytes.
inline constexpr size_t kMaxFactsEntry = size_t{64} << 20;

class FactsStore : public image::SharedLayers {
 public:
  /// Entries under "imgcheck:facts:<name>", at most `max_bytes` of them in all.
  FactsStore(std::shared_ptr<RedisClient> client, trust::VerdictSeal seal, uint64_t max_bytes,
             Metrics& metrics);

  std::optional<std::string> Get(const std::string& name) override;
  void Put(const std::string& name, std::string_view value) override;
  void Discard(const std::string& name, std::string_view why) override;

 private:
  std::shared_ptr<RedisClient> client_;
  trust::VerdictSeal seal_;
  uint64_t max_bytes_;
  Metrics& metrics_;
  std::atomic<bool> failing_{false};  ///< Redis failed last time: logged once until it answers

  void Failed(const util::Fatal& e);
  void Answered();
};

/// One scan's view of the store: whether it found everything there (no blob read).
class ScanFacts : public image::SharedLayers {
 public:
  explicit ScanFacts(std::shared_ptr<FactsStore> store) : store_(std::move(store)) {}
  std::optional<std::string> Get(const std::string& name) override {
    auto v = store_->Get(name);
    ++(v ? hits_ : misses_);
    return v;
  }
  void Put(const std::string& name, std::string_view value) override { store_->Put(name, value); }
  void Discard(const std::string& name, std::string_view why) override {
    ++misses_;  // read from the registry instead
    store_->Discard(name, why);
  }
  /// True when the scan took something from the store and read nothing it lacked. (Readings in
  /// the replica's own cache do not ask the store; the config always does.)
  bool FromFactsAlone() const { return hits_ > 0 && misses_ == 0; }

 private:
  std::shared_ptr<FactsStore> store_;
  std::atomic<int> hits_{0}, misses_{0};
};

}  // namespace imgcheck::serve::fleet

// Verdicts by manifest digest: an in-process LRU, optionally a store shared by replicas, and a
// bounded pool of scan workers. Concurrent askers for one unknown digest share one scan (single
// flight), within this process through the flight table and across replicas through the store's
// lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "serve/metrics.h"
#include "serve/redis_store.h"
#include "serve/verdict.h"

namespace imgcheck::serve {

/// Scans the image `reference` (pinned by digest) and returns its verdict (VerdictOf its report):
/// kept typed in memory, its JSON written only to the shared store. Throws (util::Fatal) when
/// the image cannot be scanned. Called on worker threads.
using Scanner = std::function<Verdict(const std::string& reference)>;

struct VerdictOptions {
  std::string identity;          ///< policy identity (tool version, rules, config): part of keys
  int workers = 2;               ///< scans at once
  size_t queue_limit = 256;      ///< scans waiting for a worker; more are refused
  size_t cache_entries = 10000;  ///< in-process LRU size
  std::chrono::seconds store_ttl{std::chrono::hours(24 * 30)};  ///< verdict lifetime in the store
  std::chrono::seconds lock_ttl{std::chrono::minutes(30)};      ///< a scan's lock in the store
  std::chrono::seconds failure_ttl{30};  ///< a failed scan is not retried sooner
  std::chrono::milliseconds poll{100};   ///< waiting on another replica's scan
};

struct Outcome {
  enum class State { kReady, kPending, kFailed } state = State::kPending;
  std::shared_ptr<const Verdict> verdict;  ///< kReady
  std::string error;                       ///< kFailed: why the scan failed
  std::string cached;                      ///< kReady from a cache: "memory" or "redis"
};

class Verdicts {
 public:
  Verdicts(Scanner scanner, VerdictOptions options, std::unique_ptr<SharedStore> shared,
           Metrics& metrics);
  ~Verdicts();
  Verdicts(const Verdicts&) = delete;
  Verdicts& operator=(const Verdicts&) = delete;

  /// The verdict for manifest `digest` (`reference` names it pinned: host/repo@digest), waiting
  /// at most `budget` for a scan, which goes on in the background when the wait ends first.
  Outcome Get(const std::string& digest, const std::string& reference,
              std::chrono::milliseconds budget);
  /// Waits at most `budget` for the scan of `digest` that Get started; without one, what is
  /// known here (a verdict, a recent failure) or kPending.
  Outcome Wait(const std::string& digest, std::chrono::milliseconds budget);
  /// Starts a scan unless a verdict or a scan exists (registry push events). False when the
  /// queue is full.
  bool Prefetch(const std::string& digest, const std::string& reference);
  /// The verdict when one is known here or in the store, without scanning; `tier` says where
  /// it was found ("memory", "redis").
  std::shared_ptr<const Verdict> Lookup(const std::string& digest, std::string* tier = nullptr);
  /// Stops the workers; queued scans are dropped, running ones finish.
  void Stop();
  bool SharedStoreUp();

 private:
  struct Flight {
    std::mutex mu;
    std::condition_variable done;
    bool finished = false;
    Outcome outcome;
  };

  std::string Key(const std::string& digest) const;
  std::shared_ptr<const Verdict> FromMemory(const std::string& digest);
  void Remember(const std::string& digest, std::shared_ptr<const Verdict> v);
  /// The running or new flight for `digest`; null when the queue is full. `fresh` tells which.
  std::shared_ptr<Flight> Join(const std::string& digest, const std::string& reference,
                               bool& fresh);
  void Work();
  Outcome Scan(const std::string& digest, const std::string& reference);
  std::shared_ptr<const Verdict> FromStore(const std::string& digest);

  Scanner scanner_;
  VerdictOptions options_;
  std::unique_ptr<SharedStore> shared_;
  Metrics& metrics_;

  std::mutex mu_;
  std::condition_variable work_;     ///< a job was queued (or stopping)
  std::condition_variable stopped_;  ///< stopping: wakes scans that wait on another replica
  bool stopping_ = false;
  std::list<std::pair<std::string, std::shared_ptr<const Verdict>>> lru_;  ///< newest first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::string>> failed_;
  std::deque<std::pair<std::string, std::string>> queue_;  ///< digest, reference
  std::vector<std::thread> threads_;
};

}  // namespace imgcheck::serve

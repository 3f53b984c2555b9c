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
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "serve/fleet/pacer.h"
#include "serve/fleet/redis_store.h"
#include "serve/fleet/unsent.h"
#include "serve/fleet/work_queue.h"
#include "serve/metrics.h"
#include "serve/trust/trust.h"
#include "serve/verdict.h"

namespace imgcheck::serve::fleet {

/// Scans the image `reference` (pinned by digest) and returns its verdict (VerdictOf its report):
/// kept typed in memory, its JSON written only to the shared store. Throws (util::Fatal) when
/// the image cannot be scanned. Called on worker threads.
using Scanner = std::function<Verdict(const std::string& reference)>;

struct VerdictOptions {
  std::string identity;  ///< policy identity (tool version, rules, config): part of keys
  int workers = 2;       ///< scans at once
  /// Scans of images on one registry at once (--registry-share): a registry that stalls holds
  /// no more workers than this, and the others' images are scanned by the rest. 0: workers - 1
  /// (at least 1), so one worker is always left for the other registries.
  int registry_share = 0;
  /// Sweep scans started a second per registry (--sweep-rate): re-judging after a rules update
  /// is paced, not as fast as the facts store answers.
  double sweep_rate = 50;
  size_t queue_limit = 256;      ///< scans waiting for a worker; more are refused
  size_t cache_entries = 10000;  ///< in-process LRU size
  std::chrono::seconds store_ttl{std::chrono::hours(24 * 30)};  ///< verdict lifetime in the store
  /// --deadline, the longest a scan reads its image: a scan's lock in the store is leased for
  /// LockLease of it and renewed while the scan runs, but not past it; a replica waits on
  /// another's lock no longer than it and the lease.
  std::chrono::seconds scan_deadline{3600};
  std::chrono::seconds failure_ttl{30};  ///< a failed scan is not retried sooner
  std::chrono::milliseconds poll{100};   ///< waiting on another replica's scan
  /// --verdict-key-file's key: verdicts in the shared store are sealed with it, and one that is
  /// not sealed with it is ignored (VerdictSeal). Empty: stored and trusted unsigned.
  std::string verdict_key;
};

struct Outcome {
  enum class State { kReady, kPending, kFailed } state = State::kPending;
  std::shared_ptr<const Verdict> verdict;  ///< kReady
  std::string error;                       ///< kFailed: why the scan failed
  std::string cached;                      ///< kReady from a cache: "memory" or "redis"
};

/// The lease of a scan's lock in the shared store, in proportion to the scan's deadline (1/360
/// of it: 10 s for the default hour), within 1 s and 10 s. It is renewed every third of it while
/// the scan runs, so a replica that died (SIGKILL, node lost) holds the others off that long.
std::chrono::milliseconds LockLease(std::chrono::seconds scan_deadline);

/// The registry host of a scan's reference ("docker://HOST/repo@digest" or "HOST/repo@digest").
std::string_view RegistryOf(std::string_view reference);

class Verdicts {
  using Clock = std::chrono::steady_clock;

 public:
  /// `queue`: where the digests to scan wait (MakeStreamQueue with --redis); null: in memory,
  /// at most options.queue_limit.
  Verdicts(Scanner scanner, VerdictOptions options, std::unique_ptr<SharedStore> shared,
           Metrics& metrics, std::unique_ptr<WorkQueue> queue = nullptr);
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
  /// Queues `digest` behind every admission miss and push (a sweep: re-judging what the fleet
  /// knows); a worker takes it only while another is left for those. False when full.
  bool Sweep(const std::string& digest, const std::string& reference);
  /// The verdict when one is known here or in the store, without scanning; `tier` says where
  /// it was found ("memory", "redis").
  std::shared_ptr<const Verdict> Lookup(const std::string& digest, std::string* tier = nullptr);
  /// Remembers `verdict`, obtained without a scan (a signed attestation), for `digest`, here and
  /// in the shared store, as a scan's would be.
  void Put(const std::string& digest, std::shared_ptr<const Verdict> verdict);
  /// Stops the workers; queued scans are dropped, running ones finish.
  void Stop() { Stop(std::chrono::steady_clock::time_point::max()); }
  /// The same, waiting for running scans until `by` only: false when some still run then (their
  /// threads are left to the process's exit, which must follow, and their locks in the store
  /// are released, waiting 200 ms at most, so another replica takes them over at once).
  bool Stop(std::chrono::steady_clock::time_point by);
  /// Whether the shared store answers (the server's watcher asks every few seconds); when it
  /// does, the verdicts stored while it did not are written to it first.
  bool SharedStoreUp();
  /// Measures the work queue's depth into the metrics (the server's watcher, every few seconds).
  void MeasureQueue();
  bool HasSharedStore() const { return shared_ != nullptr; }
  /// A new policy (serve reloads its rule data on SIGHUP): later verdicts are keyed by
  /// `identity`, and those kept in memory, judged by the old policy, are forgotten. When the
  /// identity changed, every digest judged before (by any replica, with --redis) is queued as
  /// a sweep, once per identity across the fleet; returns how many this call queued.
  size_t SetIdentity(const std::string& identity);

 private:
  struct Flight {
    Clock::time_point since = Clock::now();
    std::mutex mu;
    std::condition_variable done;
    bool finished = false;
    Outcome outcome;
  };

  std::string Key(const std::string& digest) const;
  std::shared_ptr<const Verdict> FromMemory(const std::string& digest);
  /// Keeps `v` in the LRU and ends the flight of `digest` with it, as found in `tier` ("" when
  /// scanned here).
  void Remember(const std::string& digest, std::shared_ptr<const Verdict> v, const char* tier = "");
  /// The running or new flight for `digest`; null when the queue is full. `fresh` tells which.
  std::shared_ptr<Flight> Join(const std::string& digest, const std::string& reference,
                               bool& fresh);
  /// Waits for `flight` at most `budget`; with a shared store, polling it too (another replica
  /// may take the work from the shared queue).
  Outcome Await(const std::shared_ptr<Flight>& flight, const std::string& digest,
                std::chrono::milliseconds budget);
  void Work();
  /// Scans a queued item unless its verdict is known already; acknowledges it or says why not.
  /// nullopt: left for another replica (a sweep for a policy this one has not loaded).
  std::optional<Outcome> Process(const WorkItem& item);
  /// `sweep`: paced by options_.sweep_rate.
  Outcome Scan(const std::string& digest, const std::string& reference, bool sweep);
  std::shared_ptr<const Verdict> FromStore(const std::string& digest);
  /// Writes the sealed `value` at `key` in the shared store; while it does not answer, keeps it
  /// to be written by SharedStoreUp (the newest options_.queue_limit).
  void Store(const std::string& key, const std::string& value);
  /// Puts `item`, whose registry has its share of the workers, back at the end of the queue;
  /// false when the queue is full (the item is then scanned all the same, never lost).
  bool Defer(const WorkItem& item, const std::string& registry);

  Scanner scanner_;
  VerdictOptions options_;  ///< identity under identity_mu_
  mutable std::mutex identity_mu_;
  trust::VerdictSeal seal_;
  std::shared_ptr<SharedStore> shared_;  ///< shared with the thread that releases locks at Stop
  Metrics& metrics_;
  /// Key and sealed verdict, stored while the shared store did not answer.
  Unsent<std::pair<std::string, std::string>> unsent_{options_.queue_limit};

  std::mutex mu_;
  std::condition_variable work_;     ///< a job was queued (or stopping)
  std::condition_variable stopped_;  ///< stopping: wakes scans that wait on another replica
  bool stopping_ = false;
  std::list<std::pair<std::string, std::shared_ptr<const Verdict>>> lru_;  ///< newest first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;
  std::set<std::string> held_;  ///< the store's locks this process's scans hold
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::string>> failed_;
  std::unique_ptr<WorkQueue> queue_;
  int sweeping_ = 0;  ///< workers on sweeps, under mu_: at most workers - 1 (at least 1)
  std::map<std::string, int, std::less<>> registry_busy_;  ///< scans by registry, under mu_
  Pacer sweep_pacer_{options_.sweep_rate};
  std::vector<std::thread> threads_;
  int live_workers_ = 0;            ///< under mu_
  std::condition_variable exited_;  ///< a worker returned
};

}  // namespace imgcheck::serve::fleet

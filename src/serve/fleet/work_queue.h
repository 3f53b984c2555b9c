// The digests waiting to be scanned or re-judged. In one process (no --redis) a bounded queue in
// memory; with --redis two Redis Streams read by one consumer group that every replica joins, so
// work outlives the replica that accepted it (Harbor's jobservice and Trivy Operator lose or
// repeat it): an entry is acknowledged once its verdict is stored, an entry a dead replica held
// is reclaimed by another once idle for a lease (XAUTOCLAIM), one a replica cannot judge under
// its policy is handed back for another to take at once, and one delivered too often goes to a
// dead-letter stream with its last error.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "serve/fleet/redis_client.h"
#include "serve/metrics.h"

namespace imgcheck::serve::fleet {

/// Admission misses and push events (kNow) are always taken before sweeps (re-judging what the
/// fleet knows after a rules update, crawls).
enum class Priority { kNow, kSweep };
std::string_view PriorityName(Priority p);  ///< "now", "sweep": stream names and metric labels

struct WorkItem {
  std::string id;         ///< the stream entry's id; empty in the in-process queue
  std::string digest;     ///< the image manifest's digest (validated: sha256:64 hex)
  std::string reference;  ///< what a scan reads: host/repo@digest
  Priority priority = Priority::kNow;
  /// A sweep's policy identity: judged only by a replica under that policy (one that has not
  /// reloaded yet leaves it for later); empty: any.
  std::string identity;
};

/// What waits at one priority: entries not yet acknowledged, and the age of the oldest.
struct QueueDepth {
  size_t entries = 0;
  double oldest_seconds = 0;
};

class WorkQueue {
 public:
  virtual ~WorkQueue() = default;
  /// Queues a digest; false when the queue is full or stopping.
  virtual bool Add(const std::string& digest, const std::string& reference, Priority p) = 0;
  /// The next item for this process, any kNow one before any sweep, sweeps only when `sweeps`;
  /// waits at most `wait` for one. nullopt when none (or the store fails: it is logged).
  virtual std::optional<WorkItem> Take(std::chrono::milliseconds wait, bool sweeps) = 0;
  /// Keeps `item` this process's while its scan runs (an item idle for a lease is reclaimed by
  /// another replica); false when it is ours no more.
  virtual bool Touch(const WorkItem& item) = 0;
  /// Its verdict is stored (or was already): the item is gone for good.
  virtual void Done(const WorkItem& item) = 0;
  /// Puts `item` back at the end of its priority's queue, with its fields (a sweep's identity
  /// too), as a new entry: no delivery is counted against it. False when it could not be
  /// (the queue in memory is full); it is then still this process's.
  virtual bool Requeue(const WorkItem& item) = 0;
  /// Its scan failed with `error`: delivered again later (to any replica), or dead-lettered
  /// once delivered too often.
  virtual void Failed(const WorkItem& item, const std::string& error) = 0;
  /// A sweep for a policy this process does not run (`why`): handed back at once the first
  /// time this process meets it (a replica that reloaded before this one takes it), else kept
  /// like a failure (delivered again after a lease, dead-lettered once delivered too often:
  /// a policy no replica runs any more) until HandBack.
  virtual void Refused(const WorkItem& item, const std::string& why) = 0;
  /// A reload: every entry this process refused and still holds is handed back, a new entry
  /// that any replica (this one under its new policy too) takes at once, with no lease waited
  /// and no delivery counted. Returns how many.
  virtual size_t HandBack() = 0;
  /// Records that `digest` was judged (now: its last-seen time), so that a new policy re-judges
  /// it (Resweep). The newest kKnownLimit are kept. While Redis does not answer, the newest
  /// StreamOptions::local_limit are kept here and written once it answers again.
  virtual void Judged(const std::string& digest, const std::string& reference) = 0;
  /// Queues every digest judged before as a sweep, once per policy `identity` however many
  /// replicas reload into it; returns how many were queued (0 when another replica did it).
  virtual size_t Resweep(const std::string& identity) = 0;
  /// Wakes every Take; what waits in this process only (in memory) is dropped.
  virtual void Stop() = 0;
  virtual QueueDepth Depth(Priority p) = 0;
};

/// Digests kept for re-judging (the most recently judged).
inline constexpr size_t kKnownLimit = 100000;

/// The queue in memory: at most `limit` items of each priority wait.
std::unique_ptr<WorkQueue> MakeLocalQueue(size_t limit);

struct StreamOptions {
  std::string consumer;  ///< this replica's name in the group (unique: host, pid, random)
  /// An entry delivered to a replica that has not touched it for this long is reclaimed by
  /// another (LockLease of --deadline: a SIGKILLed replica's work moves on within it).
  std::chrono::milliseconds lease{10000};
  /// Delivered this often without a verdict (each a scan that failed, or a replica that
  /// stopped answering): dead-lettered at its next claim.
  int max_deliveries = 5;
  size_t limit = 100000;  ///< entries per stream; more are refused
  /// Items kept in memory while Redis does not answer; the known digests judged meanwhile too.
  size_t local_limit = 256;
  std::chrono::milliseconds poll{200};  ///< an idle worker looks at the streams this often
};

/// The queue on Redis Streams "imgcheck:work:now" and "imgcheck:work:sweep" (group "imgcheck"),
/// dead letters on "imgcheck:work:dead". Entries are hostile input: one that is not a digest
/// and a reference to it is acknowledged, dropped and counted. While Redis does not answer,
/// items are kept in memory (degraded, as the verdicts are).
std::unique_ptr<WorkQueue> MakeStreamQueue(std::shared_ptr<RedisClient> client,
                                           StreamOptions options, Metrics& metrics);

/// A consumer name for this process: "HOST-PID-RANDOM".
std::string ConsumerName();

}  // namespace imgcheck::serve::fleet

#include "serve/fleet/verdicts.h"

#include <algorithm>
#include <future>
#include <optional>

#include "serve/log.h"

namespace imgcheck::serve::fleet {

using Clock = std::chrono::steady_clock;

namespace {

// Calls `renew` every `every` until destroyed, or until `until` (the scan's deadline: a scan
// stuck past it holds the other replicas off no longer), or until `renew` says it is lost.
// Keeps a scan's lock in the shared store and its work entry this replica's.
constexpr std::chrono::milliseconds kReleaseWait{200};  // for abandoned scans' locks at Stop
constexpr std::chrono::milliseconds kTakeWait{500};     // a worker looks for stopping this often
constexpr std::chrono::milliseconds kDeferPause{100};   // after putting back work over its share

class Renewal {
 public:
  Renewal(std::function<bool()> renew, std::chrono::milliseconds every, Clock::time_point until,
          std::string what)
      : thread_([this, renew = std::move(renew), every, until, what = std::move(what)] {
          std::unique_lock lock(mu_);
          while (!done_cv_.wait_for(lock, every, [&] { return done_; })) {
            if (Clock::now() >= until) {
              Log("a scan ran past --deadline: its " + what + " lapses");
              return;
            }
            try {
              if (!renew()) {
                Log("lost the " + what);
                return;
              }
            } catch (const util::Fatal& e) {
              Log(e.what());
            }
          }
        }) {}
  ~Renewal() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }
  Renewal(const Renewal&) = delete;
  Renewal& operator=(const Renewal&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

std::string_view RegistryOf(std::string_view reference) {
  if (reference.starts_with("docker://")) reference.remove_prefix(9);
  return reference.substr(0, reference.find('/'));
}

std::chrono::milliseconds LockLease(std::chrono::seconds scan_deadline) {
  using std::chrono::milliseconds;
  return std::clamp<milliseconds>(milliseconds(scan_deadline) / 360, milliseconds(1000),
                                  milliseconds(10000));
}

Verdicts::Verdicts(Scanner scanner, VerdictOptions options, std::unique_ptr<SharedStore> shared,
                   Metrics& metrics, std::unique_ptr<WorkQueue> queue)
    : scanner_(std::move(scanner)),
      options_(std::move(options)),
      seal_(options_.verdict_key),
      shared_(std::move(shared)),
      metrics_(metrics),
      queue_(queue ? std::move(queue) : MakeLocalQueue(options_.queue_limit)) {
  live_workers_ = std::max(1, options_.workers);
  for (int i = 0; i < live_workers_; ++i)
    threads_.emplace_back([this] {
      Work();
      std::lock_guard lock(mu_);
      --live_workers_;
      exited_.notify_all();
    });
}

Verdicts::~Verdicts() { Stop(); }

bool Verdicts::Stop(Clock::time_point by) {
  {
    std::unique_lock lock(mu_);
    if (stopping_ && threads_.empty()) {  // stopped before; scans abandoned then may still run
      auto all_out = [&] { return live_workers_ == 0; };
      if (by != Clock::time_point::max()) return exited_.wait_until(lock, by, all_out);
      exited_.wait(lock, all_out);
      return true;
    }
    stopping_ = true;
    for (auto& [digest, flight] : flights_) {
      std::lock_guard fl(flight->mu);
      if (!flight->finished) {
        flight->finished = true;
        flight->outcome.state = Outcome::State::kFailed;
        flight->outcome.error = "the server is shutting down";
      }
      flight->done.notify_all();
    }
  }
  queue_->Stop();  // what waits in Redis is taken by other replicas
  work_.notify_all();
  stopped_.notify_all();
  bool done;
  {
    std::unique_lock lock(mu_);
    auto all_out = [&] { return live_workers_ == 0; };
    if (by == Clock::time_point::max())
      exited_.wait(lock, all_out), done = true;
    else
      done = exited_.wait_until(lock, by, all_out);
  }
  for (auto& t : threads_) done ? t.join() : t.detach();
  threads_.clear();
  if (!done && shared_) {
    std::set<std::string> held;
    {
      std::lock_guard lock(mu_);
      held.swap(held_);
    }
    // On a thread of its own, waited for briefly: a Redis that does not answer must not hold
    // the exit past --shutdown-grace (the locks then lapse a lease later).
    auto released = std::make_shared<std::promise<void>>();
    std::future<void> finished = released->get_future();
    std::thread([store = shared_, held = std::move(held), released] {
      for (const std::string& key : held) {
        try {
          store->Unlock(key);
        } catch (const util::Fatal& e) {
          Log(e.what());
        }
      }
      released->set_value();
    }).detach();
    finished.wait_for(kReleaseWait);
  }
  return done;
}

std::string Verdicts::Key(const std::string& digest) const {
  std::lock_guard lock(identity_mu_);
  return "imgcheck:verdict:" + options_.identity + ":" + digest;
}

size_t Verdicts::SetIdentity(const std::string& identity) {
  bool changed;
  {
    std::lock_guard lock(identity_mu_);
    changed = options_.identity != identity;
    options_.identity = identity;
  }
  {
    std::lock_guard lock(mu_);
    lru_.clear();
    index_.clear();
    failed_.clear();
  }
  if (!changed) return 0;
  // What this replica refused under its old policy is handed back at once, not left to a lease.
  if (size_t back = queue_->HandBack())
    Log("reload: handed back " + std::to_string(back) +
        " work entries refused under the old policy, for any replica to take now");
  return queue_->Resweep(identity);
}

std::shared_ptr<const Verdict> Verdicts::FromMemory(const std::string& digest) {
  std::lock_guard lock(mu_);
  auto it = index_.find(digest);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void Verdicts::Remember(const std::string& digest, std::shared_ptr<const Verdict> v,
                        const char* tier) {
  std::shared_ptr<Flight> flight;  // a scan here or elsewhere that this verdict ends
  {
    std::lock_guard lock(mu_);
    if (auto f = flights_.find(digest); f != flights_.end()) {
      flight = f->second;
      flights_.erase(f);
    }
    if (auto it = index_.find(digest); it != index_.end()) {
      it->second->second = v;
      lru_.splice(lru_.begin(), lru_, it->second);
    } else {
      lru_.emplace_front(digest, v);
      index_[digest] = lru_.begin();
      while (lru_.size() > std::max<size_t>(1, options_.cache_entries)) {
        index_.erase(lru_.back().first);
        lru_.pop_back();
      }
    }
  }
  if (!flight) return;
  std::lock_guard fl(flight->mu);
  if (!flight->finished) {
    flight->finished = true;
    flight->outcome.state = Outcome::State::kReady;
    flight->outcome.verdict = std::move(v);
    flight->outcome.cached = tier;
  }
  flight->done.notify_all();
}

std::shared_ptr<const Verdict> Verdicts::FromStore(const std::string& digest) {
  if (!shared_) return nullptr;
  std::optional<std::string> text;
  try {
    text = shared_->Get(Key(digest));
  } catch (const util::Fatal& e) {
    Log(e.what());
    return nullptr;
  }
  if (!text) return nullptr;
  std::string report;
  if (trust::VerdictSeal::Check check = seal_.Open(Key(digest), *text, report);
      check != trust::VerdictSeal::Check::kOk) {
    // Not written by a holder of the key: ignored (a scan overwrites it), counted, and said once
    // per reason rather than on every lookup.
    if (metrics_.VerdictRejected(std::string(CheckName(check))) == 1)
      Log("ignoring a verdict in the shared store that fails the --verdict-key-file check (" +
          std::string(CheckName(check)) + ", first at " + Key(digest) +
          "); counted in imgcheck_verdicts_rejected_total");
    return nullptr;
  }
  auto v = ParseVerdict(report);
  if (!v) return nullptr;  // written by something else: scan again, and overwrite it
  auto shared = std::make_shared<const Verdict>(std::move(*v));
  Remember(digest, shared, "redis");
  return shared;
}

std::shared_ptr<const Verdict> Verdicts::Lookup(const std::string& digest, std::string* tier) {
  for (const char* where : {"memory", "redis"}) {
    auto v = where[0] == 'm' ? FromMemory(digest) : FromStore(digest);
    if (!v) continue;
    metrics_.CacheHit(where);
    if (tier) *tier = where;
    return v;
  }
  metrics_.CacheMiss();
  return nullptr;
}

std::shared_ptr<Verdicts::Flight> Verdicts::Join(const std::string& digest,
                                                 const std::string& reference, bool& fresh) {
  fresh = false;
  auto flight = std::make_shared<Flight>();
  {
    std::lock_guard lock(mu_);
    if (auto it = flights_.find(digest); it != flights_.end()) return it->second;
    if (auto f = failed_.find(digest); f != failed_.end()) {
      if (Clock::now() < f->second.first) {  // failed recently: answer that, do not rescan yet
        flight->finished = true;
        flight->outcome.state = Outcome::State::kFailed;
        flight->outcome.error = f->second.second;
        return flight;
      }
      failed_.erase(f);
    }
    if (stopping_) return nullptr;
    // A flight whose work another replica took, and whose verdict nobody here asked for since,
    // is forgotten once it is older than any scan can be.
    if (flights_.size() >= options_.queue_limit) {
      auto old = Clock::now() - options_.scan_deadline - 2 * LockLease(options_.scan_deadline);
      std::erase_if(flights_, [&](const auto& f) { return f.second->since < old; });
    }
    flights_[digest] = flight;
  }
  // Outside the lock: with --redis this is a round trip.
  if (!queue_->Add(digest, reference, Priority::kNow)) {
    std::lock_guard lock(mu_);
    if (auto it = flights_.find(digest); it != flights_.end() && it->second == flight)
      flights_.erase(it);
    return nullptr;
  }
  fresh = true;
  work_.notify_one();
  return flight;
}

Outcome Verdicts::Await(const std::shared_ptr<Flight>& flight, const std::string& digest,
                        std::chrono::milliseconds budget) {
  auto end = Clock::now() + budget;
  std::unique_lock lock(flight->mu);
  for (;;) {
    auto slice = shared_ ? std::min(end, Clock::now() + options_.poll) : end;
    flight->done.wait_until(lock, slice, [&] { return flight->finished; });
    if (flight->finished) return flight->outcome;
    if (Clock::now() >= end) return {};  // pending
    lock.unlock();
    FromStore(digest);  // a verdict there ends the flight (Remember)
    lock.lock();
  }
}

Outcome Verdicts::Get(const std::string& digest, const std::string& reference,
                      std::chrono::milliseconds budget) {
  Outcome out;
  if (auto v = Lookup(digest, &out.cached)) {
    out.state = Outcome::State::kReady;
    out.verdict = v;
    return out;
  }
  bool fresh = false;
  std::shared_ptr<Flight> flight = Join(digest, reference, fresh);
  if (!flight) {
    out.state = Outcome::State::kFailed;
    out.error = "the scan queue is full (" + std::to_string(options_.queue_limit) + " waiting)";
    return out;
  }
  return Await(flight, digest, budget);
}

Outcome Verdicts::Wait(const std::string& digest, std::chrono::milliseconds budget) {
  Outcome out;
  std::shared_ptr<Flight> flight;
  {
    std::lock_guard lock(mu_);
    if (auto it = flights_.find(digest); it != flights_.end()) {
      flight = it->second;
    } else if (auto v = index_.find(digest); v != index_.end()) {
      out.state = Outcome::State::kReady;
      out.verdict = v->second->second;
      return out;
    } else if (auto f = failed_.find(digest); f != failed_.end()) {
      out.state = Outcome::State::kFailed;
      out.error = f->second.second;
      return out;
    } else {
      return out;  // pending: the queue was full or the server is stopping
    }
  }
  return Await(flight, digest, budget);
}

bool Verdicts::Prefetch(const std::string& digest, const std::string& reference) {
  if (Lookup(digest)) return true;
  bool fresh = false;
  return Join(digest, reference, fresh) != nullptr;
}

bool Verdicts::Sweep(const std::string& digest, const std::string& reference) {
  return queue_->Add(digest, reference, Priority::kSweep);
}

bool Verdicts::Defer(const WorkItem& item, const std::string& registry) {
  // A new entry at the end for the old one: waiting for a share costs no delivery
  // (--max-deliveries counts failures), and a sweep keeps its policy identity.
  if (!queue_->Requeue(item)) return false;
  metrics_.WorkDeferred(registry);
  // When only such work waits, this worker would take it back at once: a pause bounds that.
  std::unique_lock lock(mu_);
  stopped_.wait_for(lock, kDeferPause, [&] { return stopping_; });
  return true;
}

void Verdicts::Work() {
  const int sweep_slots = std::max(1, options_.workers - 1);
  const int registry_share =
      options_.registry_share > 0 ? options_.registry_share : std::max(1, options_.workers - 1);
  for (;;) {
    bool sweeps = false;  // a sweep slot reserved for this take
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      if (sweeping_ < sweep_slots) sweeps = true, ++sweeping_;
    }
    std::optional<WorkItem> item = queue_->Take(kTakeWait, sweeps);
    {
      std::lock_guard lock(mu_);
      if (sweeps && (!item || item->priority != Priority::kSweep)) --sweeping_;
      // Stopping: an item taken stays in the shared queue, for another replica.
      if (stopping_) return;
    }
    if (!item) continue;
    const std::string registry(RegistryOf(item->reference));
    bool over_share = false;
    {
      std::lock_guard lock(mu_);
      int& busy = registry_busy_[registry];
      over_share = busy >= registry_share;
      if (!over_share) ++busy;
    }
    if (over_share) {
      bool deferred = Defer(*item, registry);
      std::lock_guard lock(mu_);
      if (!deferred) {
        ++registry_busy_[registry];  // over its share only when the queue is full
      } else {
        if (item->priority == Priority::kSweep) --sweeping_;
        continue;
      }
    }
    std::optional<Outcome> processed = Process(*item);
    std::shared_ptr<Flight> flight;
    {
      std::lock_guard lock(mu_);
      if (--registry_busy_[registry] == 0) registry_busy_.erase(registry);
      if (item->priority == Priority::kSweep) --sweeping_;
      if (!processed) continue;
      if (processed->state == Outcome::State::kFailed)
        failed_[item->digest] = {Clock::now() + options_.failure_ttl, processed->error};
      if (auto it = flights_.find(item->digest); it != flights_.end()) {
        flight = it->second;
        flights_.erase(it);
      }
    }
    if (!flight) continue;
    std::lock_guard fl(flight->mu);
    if (!flight->finished) {
      flight->finished = true;
      flight->outcome = std::move(*processed);
    }
    flight->done.notify_all();
  }
}

std::optional<Outcome> Verdicts::Process(const WorkItem& item) {
  if (!item.identity.empty()) {
    std::string mine;
    {
      std::lock_guard lock(identity_mu_);
      mine = options_.identity;
    }
    if (item.identity != mine) {  // queued by a replica that reloaded before this one
      queue_->Refused(item, "queued for policy " + item.identity + ", met a replica under " + mine);
      return std::nullopt;
    }
  }
  // Idempotent: a digest judged under the current policy is acknowledged without work (Scan
  // looks in the shared store first).
  if (auto v = FromMemory(item.digest)) {
    queue_->Done(item);
    Outcome out;
    out.state = Outcome::State::kReady;
    out.verdict = v;
    out.cached = "memory";
    return out;
  }
  Outcome out;
  {
    std::optional<Renewal> keep;
    if (!item.id.empty()) {
      const std::chrono::milliseconds lease = LockLease(options_.scan_deadline);
      keep.emplace([this, &item] { return queue_->Touch(item); }, lease / 3,
                   Clock::now() + options_.scan_deadline + lease, "work entry " + item.id);
    }
    out = Scan(item.digest, item.reference, item.priority == Priority::kSweep);
  }
  if (out.state == Outcome::State::kReady)
    queue_->Done(item);
  else
    queue_->Failed(item, out.error);
  return out;
}

Outcome Verdicts::Scan(const std::string& digest, const std::string& reference, bool sweep) {
  Outcome out;
  // One key for the whole scan: a reload (SetIdentity) meanwhile must not file this verdict,
  // judged by the policy the scan started with, under the new policy's key.
  const std::string key = Key(digest), lock_key = key + ":lock";
  const std::chrono::milliseconds lease = LockLease(options_.scan_deadline);
  // Across replicas: the holder of the store's lock scans; the others wait for its verdict,
  // and take over when the lock lapses without one (that replica died).
  bool locked = false;
  if (shared_) {
    // The holder's scan ends by its deadline, and its lock a lease later.
    auto give_up = Clock::now() + options_.scan_deadline + lease;
    for (;;) {
      if (auto v = FromStore(digest)) {
        queue_->Judged(digest, reference);
        metrics_.CacheHit("redis");
        out.state = Outcome::State::kReady;
        out.verdict = v;
        out.cached = "redis";
        return out;
      }
      try {
        locked = shared_->Lock(lock_key, lease);
      } catch (const util::Fatal& e) {
        Log(std::string(e.what()) + "; scanning without the shared lock");
        break;
      }
      if (locked || Clock::now() > give_up) break;
      {
        std::unique_lock lock(mu_);
        if (stopped_.wait_for(lock, options_.poll, [&] { return stopping_; })) {
          out.state = Outcome::State::kFailed;
          out.error = "the server is shutting down";
          return out;
        }
      }
    }
  }
  if (locked) {
    std::lock_guard lock(mu_);
    held_.insert(lock_key);
  }
  // Releases the lock unless Stop gave it up already.
  auto release = [&] {
    if (!locked) return;
    {
      std::lock_guard lock(mu_);
      if (held_.erase(lock_key) == 0) return;
    }
    try {
      shared_->Unlock(lock_key);
    } catch (const util::Fatal& e) {
      Log(e.what());
    }
  };
  // A sweep's scans start at most --sweep-rate a second per registry: re-judging a fleet's
  // images asks each registry for their manifests at that pace, not as fast as Redis serves.
  if (sweep) {
    Pacer::Clock::time_point slot = sweep_pacer_.Reserve(std::string(RegistryOf(reference)));
    std::unique_lock lock(mu_);
    if (stopped_.wait_until(lock, slot, [&] { return stopping_; })) {
      lock.unlock();
      release();
      out.state = Outcome::State::kFailed;
      out.error = "the server is shutting down";
      return out;
    }
  }
  metrics_.ScanStarted();
  std::string_view host = RegistryOf(reference);
  metrics_.RegistryScans(host, 1);
  auto start = Clock::now();
  std::optional<Verdict> v;
  // The lock lasts a lease and is renewed while the scan runs and its verdict is stored, up to
  // the scan's deadline (which bounds the scan too): it lapses a lease after this process dies,
  // and never between the scan's end and the verdict's arrival in the store (a waiting replica
  // would scan again).
  std::optional<Renewal> renewal;
  if (locked)
    renewal.emplace([this, &lock_key, lease] { return shared_->Renew(lock_key, lease); }, lease / 3,
                    start + options_.scan_deadline, "shared lock " + lock_key);
  try {
    v = scanner_(reference);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  metrics_.ScanFinished(seconds, out.error.empty());
  metrics_.RegistryScans(host, -1);
  if (!out.error.empty()) {
    renewal.reset();
    release();
    out.state = Outcome::State::kFailed;
    Log("scan of " + reference + " failed: " + out.error);
    return out;
  }
  auto verdict = std::make_shared<const Verdict>(std::move(*v));
  Remember(digest, verdict);
  queue_->Judged(digest, reference);
  if (shared_) Store(key, seal_.Seal(key, verdict->report));
  renewal.reset();
  release();
  out.state = Outcome::State::kReady;
  out.verdict = verdict;
  return out;
}

void Verdicts::Put(const std::string& digest, std::shared_ptr<const Verdict> verdict) {
  std::string key = Key(digest);
  std::string report = verdict->report;
  Remember(digest, std::move(verdict));
  if (shared_) Store(key, seal_.Seal(key, report));
}

void Verdicts::Store(const std::string& key, const std::string& value) {
  try {
    shared_->Put(key, value, options_.store_ttl);
  } catch (const util::Fatal& e) {
    Log(e.what());
    if (size_t dropped = unsent_.Push({key, value})) metrics_.DegradedDropped("verdict", dropped);
  }
}

void Verdicts::MeasureQueue() {
  for (Priority p : {Priority::kNow, Priority::kSweep}) {
    QueueDepth d = queue_->Depth(p);
    metrics_.WorkDepth(PriorityName(p), d.entries, d.oldest_seconds);
  }
}

bool Verdicts::SharedStoreUp() {
  if (!shared_) return true;
  if (!shared_->Ping()) return false;
  // Judged while it did not answer: written now, so the other replicas need not scan again.
  auto flushed = unsent_.Flush([this](const std::pair<std::string, std::string>& kv) {
    shared_->Put(kv.first, kv.second, options_.store_ttl);
  });
  if (flushed.dropped > 0) metrics_.DegradedDropped("verdict", flushed.dropped);
  if (flushed.written > 0) {
    metrics_.DegradedReplayed("verdict", flushed.written);
    Log("wrote the " + std::to_string(flushed.written) +
        " verdicts judged while the shared store did not answer to it");
  }
  if (!flushed.error.empty()) Log(flushed.error);
  return true;
}

}  // namespace imgcheck::serve::fleet

#include "serve/verdicts.h"

#include <algorithm>
#include <future>
#include <optional>

#include "serve/log.h"

namespace imgcheck::serve {

using Clock = std::chrono::steady_clock;

namespace {

// Renews a lock every third of its lease until destroyed, or until `until` (the scan's deadline:
// a scan stuck past it holds the other replicas off no longer), or until the lock is lost.
constexpr std::chrono::milliseconds kReleaseWait{200};  // for abandoned scans' locks at Stop

class Renewal {
 public:
  Renewal(SharedStore& store, std::string key, std::chrono::milliseconds lease,
          Clock::time_point until)
      : thread_([this, &store, key = std::move(key), lease, until] {
          std::unique_lock lock(mu_);
          while (!done_cv_.wait_for(lock, lease / 3, [&] { return done_; })) {
            if (Clock::now() >= until) {
              Log("a scan ran past --deadline: its shared lock " + key + " lapses");
              return;
            }
            try {
              if (!store.Renew(key, lease)) {
                Log("lost the shared lock " + key);
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

 private:
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

std::chrono::milliseconds LockLease(std::chrono::seconds scan_deadline) {
  using std::chrono::milliseconds;
  return std::clamp<milliseconds>(milliseconds(scan_deadline) / 360, milliseconds(1000),
                                  milliseconds(10000));
}

Verdicts::Verdicts(Scanner scanner, VerdictOptions options, std::unique_ptr<SharedStore> shared,
                   Metrics& metrics)
    : scanner_(std::move(scanner)),
      options_(std::move(options)),
      seal_(options_.verdict_key),
      shared_(std::move(shared)),
      metrics_(metrics) {
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
    queue_.clear();
  }
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

void Verdicts::SetIdentity(const std::string& identity) {
  {
    std::lock_guard lock(identity_mu_);
    options_.identity = identity;
  }
  std::lock_guard lock(mu_);
  lru_.clear();
  index_.clear();
  failed_.clear();
}

std::shared_ptr<const Verdict> Verdicts::FromMemory(const std::string& digest) {
  std::lock_guard lock(mu_);
  auto it = index_.find(digest);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void Verdicts::Remember(const std::string& digest, std::shared_ptr<const Verdict> v) {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(digest); it != index_.end()) {
    it->second->second = std::move(v);
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(digest, std::move(v));
  index_[digest] = lru_.begin();
  while (lru_.size() > std::max<size_t>(1, options_.cache_entries)) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
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
  if (VerdictSeal::Check check = seal_.Open(Key(digest), *text, report);
      check != VerdictSeal::Check::kOk) {
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
  Remember(digest, shared);
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
  std::lock_guard lock(mu_);
  fresh = false;
  if (auto it = flights_.find(digest); it != flights_.end()) return it->second;
  auto flight = std::make_shared<Flight>();
  if (auto f = failed_.find(digest); f != failed_.end()) {
    if (Clock::now() < f->second.first) {  // failed recently: answer that, do not rescan yet
      flight->finished = true;
      flight->outcome.state = Outcome::State::kFailed;
      flight->outcome.error = f->second.second;
      return flight;
    }
    failed_.erase(f);
  }
  if (stopping_ || queue_.size() >= options_.queue_limit) return nullptr;
  flights_[digest] = flight;
  queue_.emplace_back(digest, reference);
  fresh = true;
  work_.notify_one();
  return flight;
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
  std::unique_lock lock(flight->mu);
  flight->done.wait_for(lock, budget, [&] { return flight->finished; });
  if (flight->finished) return flight->outcome;
  out.state = Outcome::State::kPending;
  return out;
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
  std::unique_lock lock(flight->mu);
  flight->done.wait_for(lock, budget, [&] { return flight->finished; });
  if (flight->finished) return flight->outcome;
  return out;
}

bool Verdicts::Prefetch(const std::string& digest, const std::string& reference) {
  if (Lookup(digest)) return true;
  bool fresh = false;
  return Join(digest, reference, fresh) != nullptr;
}

void Verdicts::Work() {
  for (;;) {
    std::pair<std::string, std::string> job;
    {
      std::unique_lock lock(mu_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Outcome out = Scan(job.first, job.second);
    std::shared_ptr<Flight> flight;
    {
      std::lock_guard lock(mu_);
      if (out.state == Outcome::State::kFailed)
        failed_[job.first] = {Clock::now() + options_.failure_ttl, out.error};
      if (auto it = flights_.find(job.first); it != flights_.end()) {
        flight = it->second;
        flights_.erase(it);
      }
    }
    if (!flight) continue;
    std::lock_guard fl(flight->mu);
    if (!flight->finished) {
      flight->finished = true;
      flight->outcome = std::move(out);
    }
    flight->done.notify_all();
  }
}

Outcome Verdicts::Scan(const std::string& digest, const std::string& reference) {
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
  metrics_.ScanStarted();
  auto start = Clock::now();
  std::optional<Verdict> v;
  {
    // The lock lasts a lease and is renewed while the scan runs, up to the scan's deadline
    // (which bounds the scan too): it lapses a lease after this process dies.
    std::optional<Renewal> renewal;
    if (locked) renewal.emplace(*shared_, lock_key, lease, start + options_.scan_deadline);
    try {
      v = scanner_(reference);
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  metrics_.ScanFinished(seconds, out.error.empty());
  if (!out.error.empty()) {
    release();
    out.state = Outcome::State::kFailed;
    Log("scan of " + reference + " failed: " + out.error);
    return out;
  }
  auto verdict = std::make_shared<const Verdict>(std::move(*v));
  Remember(digest, verdict);
  if (shared_) {
    try {
      shared_->Put(key, seal_.Seal(key, verdict->report), options_.store_ttl);
    } catch (const util::Fatal& e) {
      Log(e.what());
    }
  }
  release();
  out.state = Outcome::State::kReady;
  out.verdict = verdict;
  return out;
}

void Verdicts::Put(const std::string& digest, std::shared_ptr<const Verdict> verdict) {
  std::string key = Key(digest);
  std::string report = verdict->report;
  Remember(digest, std::move(verdict));
  if (!shared_) return;
  try {
    shared_->Put(key, seal_.Seal(key, report), options_.store_ttl);
  } catch (const util::Fatal& e) {
    Log(e.what());
  }
}

bool Verdicts::SharedStoreUp() { return !shared_ || shared_->Ping(); }

}  // namespace imgcheck::serve

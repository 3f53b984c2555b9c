#include "serve/fleet/work_queue.h"

#include <openssl/rand.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "serve/fleet/unsent.h"
#include "serve/log.h"
#include "util/sha256.h"

namespace imgcheck::serve::fleet {

using Clock = std::chrono::steady_clock;

std::string_view PriorityName(Priority p) { return p == Priority::kNow ? "now" : "sweep"; }

std::string ConsumerName() {
  std::array<char, 64> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  unsigned char raw[4];
  RAND_bytes(raw, sizeof raw);
  std::string out = std::string(host.data()) + "-" + std::to_string(getpid()) + "-";
  for (unsigned char b : raw) out += "0123456789abcdef"[b >> 4], out += "0123456789abcdef"[b & 15];
  return out;
}

namespace {

constexpr size_t kPriorities = 2;
size_t Index(Priority p) { return p == Priority::kNow ? 0 : 1; }

// Items waiting in this process, by priority; the in-process queue, and the stream queue's
// items while Redis is away.
class Waiting {
 public:
  explicit Waiting(size_t limit, size_t sweep_limit) : limits_{limit, sweep_limit} {}
  bool Push(WorkItem item) {
    std::lock_guard lock(mu_);
    auto& q = queues_[Index(item.priority)];
    if (stopping_ || q.size() >= limits_[Index(item.priority)]) return false;
    q.push_back({std::move(item), Clock::now()});
    ready_.notify_one();
    return true;
  }
  /// The oldest kNow item, else (when `sweeps`) the oldest sweep; waits at most `wait`.
  std::optional<WorkItem> Pop(std::chrono::milliseconds wait, bool sweeps) {
    std::unique_lock lock(mu_);
    auto any = [&] { return stopping_ || !queues_[0].empty() || (sweeps && !queues_[1].empty()); };
    if (wait.count() > 0) ready_.wait_for(lock, wait, any);
    for (size_t i = 0; i < (sweeps ? kPriorities : 1); ++i) {
      if (stopping_ || queues_[i].empty()) continue;
      WorkItem item = std::move(queues_[i].front().first);
      queues_[i].pop_front();
      return item;
    }
    return std::nullopt;
  }
  void Stop() {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& q : queues_) q.clear();
    ready_.notify_all();
  }
  QueueDepth Depth(Priority p) {
    std::lock_guard lock(mu_);
    const auto& q = queues_[Index(p)];
    QueueDepth d{q.size(), 0};
    if (!q.empty())
      d.oldest_seconds = std::chrono::duration<double>(Clock::now() - q.front().second).count();
    return d;
  }

 private:
  std::array<size_t, kPriorities> limits_;
  std::mutex mu_;
  std::condition_variable ready_;
  bool stopping_ = false;
  std::array<std::deque<std::pair<WorkItem, Clock::time_point>>, kPriorities> queues_;
};

class LocalQueue : public WorkQueue {
 public:
  /// Sweeps are bounded by what is known, not by `limit`.
  explicit LocalQueue(size_t limit) : waiting_(limit, kKnownLimit) {}
  bool Add(const std::string& digest, const std::string& reference, Priority p) override {
    return waiting_.Push({"", digest, reference, p, ""});
  }
  std::optional<WorkItem> Take(std::chrono::milliseconds wait, bool sweeps) override {
    return waiting_.Pop(wait, sweeps);
  }
  bool Touch(const WorkItem&) override { return true; }
  void Done(const WorkItem&) override {}
  bool Requeue(const WorkItem& item) override { return waiting_.Push(item); }
  void Failed(const WorkItem&, const std::string&) override {}
  void Refused(const WorkItem&, const std::string&) override {}  // no identity in memory
  size_t HandBack() override { return 0; }
  void Judged(const std::string& digest, const std::string& reference) override {
    std::lock_guard lock(mu_);
    if (auto it = known_.find(digest); it != known_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(digest, reference);
    known_[digest] = order_.begin();
    if (order_.size() > kKnownLimit) {
      known_.erase(order_.back().first);
      order_.pop_back();
    }
  }
  size_t Resweep(const std::string&) override {
    std::vector<std::pair<std::string, std::string>> all;
    {
      std::lock_guard lock(mu_);
      all.assign(order_.begin(), order_.end());
    }
    size_t n = 0;
    for (const auto& [digest, reference] : all)
      n += waiting_.Push({"", digest, reference, Priority::kSweep, ""}) ? 1 : 0;
    return n;
  }
  void Stop() override { waiting_.Stop(); }
  QueueDepth Depth(Priority p) override { return waiting_.Depth(p); }

 private:
  Waiting waiting_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::string>> order_;  ///< digest, reference; newest first
  std::unordered_map<std::string, decltype(order_)::iterator> known_;
};

// ---------------------------------------------------------------------------------------------
// Redis Streams.

constexpr const char* kGroup = "imgcheck";
constexpr const char* kDead = "imgcheck:work:dead";
constexpr size_t kDeadLimit = 10000;  // dead letters kept (the oldest trimmed)
constexpr size_t kMaxField = 2048;    // bytes of one field of an entry
constexpr size_t kMaxError = 1024;    // bytes of an error kept for the dead letter
constexpr std::chrono::hours kErrorTtl{24};

std::string StreamKey(Priority p) { return "imgcheck:work:" + std::string(PriorityName(p)); }
std::string ErrorKey(const std::string& id) { return "imgcheck:work:error:" + id; }

// Adds an entry when the stream holds fewer than ARGV[1]; with a consumer (ARGV[4], group
// ARGV[5]) it then reads the oldest entry not yet delivered for it, in the same step, so the
// replica that accepted an admission miss starts on it at once (its own, unless older ones
// wait) rather than after some replica's next poll. Returns false when full.
constexpr const char* kAddScript =
    "if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return false end "
    "redis.call('XADD', KEYS[1], '*', 'd', ARGV[2], 'r', ARGV[3]) "
    "if ARGV[4] == '' then return 1 end "
    "return redis.call('XREADGROUP', 'GROUP', ARGV[5], ARGV[4], 'COUNT', '1', 'STREAMS', "
    "KEYS[1], '>')";
// Moves entry ARGV[2] of group ARGV[1], while consumer ARGV[6] holds it, to the end of the
// stream: a new entry with its fields (digest ARGV[3], reference ARGV[4], identity ARGV[5] when
// not empty), which any consumer reads at once, as delivered never; the old one acknowledged and
// deleted with its last error (KEYS[2]), in one step, so it is never lost nor doubled. 0 when
// the consumer holds it no more (reclaimed by another).
constexpr const char* kRequeueScript =
    "local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1) "
    "if #p == 0 or p[1][2] ~= ARGV[6] then return 0 end "
    "if ARGV[5] == '' then redis.call('XADD', KEYS[1], '*', 'd', ARGV[3], 'r', ARGV[4]) "
    "else redis.call('XADD', KEYS[1], '*', 'd', ARGV[3], 'r', ARGV[4], 'i', ARGV[5]) end "
    "redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) redis.call('XDEL', KEYS[1], ARGV[2]) "
    "redis.call('DEL', KEYS[2]) return 1";
// Resets the idle time of entry ARGV[3] while consumer ARGV[2] of group ARGV[1] holds it.
constexpr const char* kTouchScript =
    "local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1) "
    "if #p == 0 or p[1][2] ~= ARGV[2] then return 0 end "
    "redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID') return 1";

// The digests the fleet has judged: a sorted set of pinned references by last-seen time (Redis's
// clock), the newest kKnownLimit kept.
constexpr const char* kKnown = "imgcheck:known";
constexpr const char* kJudgedScript =
    "local t = redis.call('TIME') "
    "redis.call('ZADD', KEYS[1], t[1], ARGV[1]) "
    "local n = redis.call('ZCARD', KEYS[1]) "
    "if n > tonumber(ARGV[2]) then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - ARGV[2] - 1) end "
    "return n";
// Queues every known digest on the sweep stream (KEYS[2]) for policy ARGV[2], newest first,
// unless the marker of that policy (KEYS[3]) says a replica did already; the stream stays
// within ARGV[1].
// What the set holds is checked when each entry is read, like any entry.
constexpr const char* kResweepScript =
    "if not redis.call('SET', KEYS[3], '1', 'NX', 'EX', 86400) then return 0 end "
    "local room = tonumber(ARGV[1]) - redis.call('XLEN', KEYS[2]) "
    "if room <= 0 then return 0 end "
    "local refs = redis.call('ZREVRANGE', KEYS[1], 0, room - 1) "
    "local n = 0 "
    "for _, r in ipairs(refs) do "
    "  local at = string.find(r, '@sha256:', 1, true) "
    "  if at then "
    "    redis.call('XADD', KEYS[2], '*', 'd', string.sub(r, at + 1), 'r', r, 'i', ARGV[2]) "
    "    n = n + 1 "
    "  end "
    "end "
    "return n";

bool IsEntryId(std::string_view id) {
  return !id.empty() && id.size() <= 41 &&
         id.find_first_not_of("0123456789-") == std::string_view::npos;
}

// An entry of a stream reply: [id, [field, value, ...]], its fields nil when deleted. `id` is
// set whenever the entry has a well-formed id (so a bad entry can still be acknowledged).
std::optional<WorkItem> ParseEntry(const redisReply* e, Priority p, std::string& id) {
  id.clear();
  if (e == nullptr || e->type != REDIS_REPLY_ARRAY || e->elements != 2) return std::nullopt;
  const redisReply* rid = e->element[0];
  if (rid->type != REDIS_REPLY_STRING || !IsEntryId({rid->str, rid->len})) return std::nullopt;
  id.assign(rid->str, rid->len);
  const redisReply* f = e->element[1];
  if (f->type != REDIS_REPLY_ARRAY || (f->elements != 4 && f->elements != 6)) return std::nullopt;
  WorkItem item{id, "", "", p, ""};
  for (size_t i = 0; i < f->elements; i += 2) {
    const redisReply* name = f->element[i];
    const redisReply* value = f->element[i + 1];
    if (name->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING ||
        value->len > kMaxField)
      return std::nullopt;
    std::string_view n(name->str, name->len);
    std::string v(value->str, value->len);
    if (n == "d" && item.digest.empty()) {
      item.digest = std::move(v);
    } else if (n == "r" && item.reference.empty()) {
      item.reference = std::move(v);
    } else if (n == "i" && item.identity.empty() && !v.empty() && v.size() <= 64 &&
               v.find_first_not_of("0123456789abcdef") == std::string::npos) {
      item.identity = std::move(v);
    } else {
      return std::nullopt;
    }
  }
  // The reference must be a registry's and pin the digest: the scan reads what the entry names
  // (never a path of this machine; the registry is checked against --allow-registry then).
  if (!util::IsSha256Digest(item.digest) || !item.reference.starts_with("docker://") ||
      !item.reference.ends_with("@" + item.digest) ||
      item.reference.find_first_of(" \t\r\n") != std::string::npos)
    return std::nullopt;
  return item;
}

class StreamQueue : public WorkQueue {
 public:
  StreamQueue(std::shared_ptr<RedisClient> client, StreamOptions o, Metrics& metrics)
      : client_(std::move(client)),
        options_(std::move(o)),
        metrics_(metrics),
        local_(options_.local_limit, options_.local_limit),
        unsent_known_(options_.local_limit) {}

  bool Add(const std::string& digest, const std::string& reference, Priority p) override {
    if (stopping_) return false;
    try {
      EnsureGroups();
      std::string consumer = p == Priority::kNow ? options_.consumer : "";
      RedisReply r =
          client_->Command({"EVAL", kAddScript, "1", StreamKey(p), std::to_string(options_.limit),
                            digest, reference, consumer, kGroup});
      Up();
      if (r->type == REDIS_REPLY_NIL) return false;  // full
      if (r->type == REDIS_REPLY_ARRAY) Delivered(r.get(), p);
      return true;
    } catch (const util::Fatal& e) {
      Down(e.what());
      if (std::string_view(e.what()).find("NOGROUP") != std::string_view::npos)
        groups_ready_ = false;
      return local_.Push({"", digest, reference, p, ""});
    }
  }

  std::optional<WorkItem> Take(std::chrono::milliseconds wait, bool sweeps) override {
    if (auto item = local_.Pop(std::chrono::milliseconds(0), sweeps)) return item;
    try {
      EnsureGroups();
      for (Priority p : {Priority::kNow, Priority::kSweep}) {
        if (p == Priority::kSweep && !sweeps) break;
        if (auto item = Reclaim(p)) return item;
        if (auto item = Read(p)) return item;
      }
      Up();
    } catch (const util::Fatal& e) {
      Down(e.what());
      if (std::string_view(e.what()).find("NOGROUP") != std::string_view::npos)
        groups_ready_ = false;  // Redis lost its data (restarted without persistence)
    }
    return local_.Pop(std::min(wait, options_.poll), sweeps);
  }

  bool Touch(const WorkItem& item) override {
    if (item.id.empty()) return true;
    try {
      RedisReply r = client_->Command({"EVAL", kTouchScript, "1", StreamKey(item.priority), kGroup,
                                       options_.consumer, item.id});
      return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    } catch (const util::Fatal& e) {
      Down(e.what());
      return true;  // unknown: keep going, the verdict is what counts
    }
  }

  void Done(const WorkItem& item) override {
    if (item.id.empty()) return;
    Release(item.id);
    try {
      Acknowledge(item.priority, item.id);
    } catch (const util::Fatal& e) {
      Down(e.what());  // delivered again later, and acknowledged then without work
    }
  }

  bool Requeue(const WorkItem& item) override {
    if (item.id.empty()) return local_.Push(item);  // kept in memory while Redis was away
    try {
      MoveToEnd(item);  // or another replica reclaimed it: not ours to scan either way
      Up();
    } catch (const util::Fatal& e) {
      Down(e.what());
      return false;  // still ours: scanned now rather than lost
    }
    Release(item.id);
    return true;
  }

  void Failed(const WorkItem& item, const std::string& error) override {
    if (item.id.empty()) return;
    Release(item.id);  // delivered again once idle for a lease, here or elsewhere
    try {
      client_->Command({"SET", ErrorKey(item.id), error.substr(0, kMaxError), "EX",
                        std::to_string(std::chrono::seconds(kErrorTtl).count())});
    } catch (const util::Fatal& e) {
      Down(e.what());
    }
  }

  void Refused(const WorkItem& item, const std::string& why) override {
    if (item.id.empty()) return;
    Release(item.id);
    bool first;
    {
      std::lock_guard lock(mu_);
      if (met_.size() >= options_.limit) met_.clear();  // bounded; each handed back once more
      first = met_.insert(item.digest + " " + item.identity).second;
    }
    try {
      if (first) {
        if (MoveToEnd(item)) metrics_.WorkHandedBack(PriorityName(item.priority));
        return;  // or another replica reclaimed it meanwhile
      }
      // Kept like a failure: the error marks a retry, not a replica that stopped answering.
      client_->Command({"SET", ErrorKey(item.id), why.substr(0, kMaxError), "EX",
                        std::to_string(std::chrono::seconds(kErrorTtl).count())});
      std::lock_guard lock(mu_);
      // Bounded as the stream is; one dropped from here waits for its lease instead.
      if (refused_.size() >= options_.limit) refused_.erase(refused_.begin());
      refused_.insert_or_assign(item.id, item);
    } catch (const util::Fatal& e) {
      Down(e.what());  // delivered again after a lease
    }
  }

  size_t HandBack() override {
    std::map<std::string, WorkItem> refused;
    {
      std::lock_guard lock(mu_);
      refused.swap(refused_);
      met_.clear();  // a new policy: what this process refused may be its own now
    }
    size_t n = 0;
    for (const auto& [id, item] : refused) {
      try {
        if (!MoveToEnd(item)) continue;  // reclaimed by another meanwhile
        metrics_.WorkHandedBack(PriorityName(item.priority));
        ++n;
      } catch (const util::Fatal& e) {
        Down(e.what());  // delivered again after a lease
        break;
      }
    }
    return n;
  }

  void Judged(const std::string& digest, const std::string& reference) override {
    (void)digest;  // the reference pins it
    try {
      Known(reference);
    } catch (const util::Fatal& e) {
      Down(e.what());
      // Written once Redis answers again (Up), so that the next policy re-judges it.
      if (size_t dropped = unsent_known_.Push(reference))
        metrics_.DegradedDropped("known", dropped);
    }
  }

  size_t Resweep(const std::string& identity) override {
    try {
      EnsureGroups();
      RedisReply r = client_->Command({"EVAL", kResweepScript, "3", kKnown,
                                       StreamKey(Priority::kSweep), "imgcheck:resweep:" + identity,
                                       std::to_string(options_.limit), identity});
      Up();
      return r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? static_cast<size_t>(r->integer) : 0;
    } catch (const util::Fatal& e) {
      Down(e.what());
      return 0;
    }
  }

  void Stop() override {
    stopping_ = true;
    local_.Stop();
  }

  QueueDepth Depth(Priority p) override {
    QueueDepth d = local_.Depth(p);
    try {
      RedisReply len = client_->Command({"XLEN", StreamKey(p)});
      if (len->type == REDIS_REPLY_INTEGER && len->integer > 0)
        d.entries += static_cast<size_t>(len->integer);
      // The oldest entry's id starts with the milliseconds of Redis's clock when it was added.
      RedisReply first = client_->Command({"XRANGE", StreamKey(p), "-", "+", "COUNT", "1"});
      RedisReply now = client_->Command({"TIME"});
      if (first->type == REDIS_REPLY_ARRAY && first->elements == 1 &&
          now->type == REDIS_REPLY_ARRAY && now->elements == 2 &&
          now->element[0]->type == REDIS_REPLY_STRING) {
        std::string id;
        if (ParseEntryId(first->element[0], id)) {
          double added = std::stod(id.substr(0, id.find('-'))) / 1000;
          double at = std::stod(std::string(now->element[0]->str, now->element[0]->len));
          d.oldest_seconds = std::max(d.oldest_seconds, std::max(0.0, at - added));
        }
      }
    } catch (const std::exception&) {  // util::Fatal, or a number out of range
    }
    return d;
  }

 private:
  static bool ParseEntryId(const redisReply* e, std::string& id) {
    if (e == nullptr || e->type != REDIS_REPLY_ARRAY || e->elements < 1 ||
        e->element[0]->type != REDIS_REPLY_STRING)
      return false;
    id.assign(e->element[0]->str, e->element[0]->len);
    return IsEntryId(id) && id.find('-') != std::string::npos && id.find('-') <= 15;
  }

  void EnsureGroups() {
    if (groups_ready_) return;
    for (Priority p : {Priority::kNow, Priority::kSweep}) {
      try {
        client_->Command({"XGROUP", "CREATE", StreamKey(p), kGroup, "0", "MKSTREAM"});
      } catch (const util::Fatal& e) {
        if (std::string_view(e.what()).find("BUSYGROUP") == std::string_view::npos) throw;
      }
    }
    groups_ready_ = true;
  }

  // The entry the add script read for this consumer (XREADGROUP's [[stream, [entry]]]): into
  // the local queue, where this process's workers take it first.
  void Delivered(const redisReply* r, Priority p) {
    if (auto item = Single(r, p)) {
      {
        std::lock_guard lock(mu_);
        held_.insert(item->id);
      }
      if (!local_.Push(*item)) Release(item->id);  // left to the lease: another replica takes it
    }
  }

  // The one entry of an XREADGROUP reply, validated.
  std::optional<WorkItem> Single(const redisReply* r, Priority p) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1) return std::nullopt;  // nil: none new
    const redisReply* s = r->element[0];
    if (s->type != REDIS_REPLY_ARRAY || s->elements != 2 ||
        s->element[1]->type != REDIS_REPLY_ARRAY || s->element[1]->elements != 1)
      return std::nullopt;
    return Accept(s->element[1]->element[0], p);
  }

  // Validates an entry delivered to us: a bad one is acknowledged and dropped.
  std::optional<WorkItem> Accept(const redisReply* e, Priority p) {
    std::string id;
    std::optional<WorkItem> item = ParseEntry(e, p, id);
    metrics_.WorkDelivered(PriorityName(p));
    if (item) return item;
    if (metrics_.WorkInvalid() == 1)
      Log("dropping a work entry in Redis that is not a digest and its reference (first: " +
          StreamKey(p) + " " + (id.empty() ? std::string("without an id") : id) +
          "); counted in imgcheck_work_invalid_total");
    if (!id.empty()) Acknowledge(p, id);
    return std::nullopt;
  }

  void Release(const std::string& id) {
    std::lock_guard lock(mu_);
    held_.erase(id);
  }

  std::optional<WorkItem> Read(Priority p) {
    RedisReply r = client_->Command({"XREADGROUP", "GROUP", kGroup, options_.consumer, "COUNT", "1",
                                     "STREAMS", StreamKey(p), ">"});
    auto item = Single(r.get(), p);
    if (item) {
      std::lock_guard lock(mu_);
      held_.insert(item->id);
    }
    return item;
  }

  // An entry idle past the lease (its replica died, or its scan failed): ours now, unless it
  // has been delivered too often, when it goes to the dead letters.
  std::optional<WorkItem> Reclaim(Priority p) {
    auto now = Clock::now();
    {
      std::lock_guard lock(mu_);
      auto& next = next_reclaim_[Index(p)];
      if (now < next) return std::nullopt;
      next = now + options_.poll;
    }
    std::string key = StreamKey(p);
    for (int tries = 0; tries < 8; ++tries) {
      RedisReply r =
          client_->Command({"XAUTOCLAIM", key, kGroup, options_.consumer,
                            std::to_string(options_.lease.count()), "0-0", "COUNT", "1"});
      // [cursor, [entry...], [deleted id...]] (Redis 7; 6.2 has no third element)
      if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
          r->element[1]->type != REDIS_REPLY_ARRAY || r->element[1]->elements == 0)
        return std::nullopt;
      const redisReply* e = r->element[1]->element[0];
      std::optional<WorkItem> item = Accept(e, p);
      if (!item) continue;
      {
        // Idle in this process's own queue: not taken twice here.
        std::lock_guard lock(mu_);
        if (!held_.insert(item->id).second) continue;
      }
      // The claim counted as a delivery: the ones before it were made (and all failed).
      long long made = Deliveries(key, item->id) - 1;
      RedisReply last = client_->Command({"GET", ErrorKey(item->id)});
      // An error recorded: its holder failed or refused it and answered; none: it died or hangs.
      bool answered = last->type == REDIS_REPLY_STRING;
      if (!answered) metrics_.WorkReclaimed(PriorityName(p));
      if (made < options_.max_deliveries) return item;
      std::string error = "no verdict after " + std::to_string(made) + " deliveries";
      if (answered && last->len <= kMaxError) error.assign(last->str, last->len);
      DeadLetter(*item, made, error);
      Release(item->id);
    }
    return std::nullopt;
  }

  long long Deliveries(const std::string& key, const std::string& id) {
    RedisReply r = client_->Command({"XPENDING", key, kGroup, id, id, "1"});
    // [[id, consumer, idle ms, deliveries]]
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1) return 0;
    const redisReply* e = r->element[0];
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 4 ||
        e->element[3]->type != REDIS_REPLY_INTEGER)
      return 0;
    return e->element[3]->integer;
  }

  void DeadLetter(const WorkItem& item, long long deliveries, const std::string& error) {
    client_->Command({"XADD", kDead, "MAXLEN", "~", std::to_string(kDeadLimit), "*", "d",
                      item.digest, "r", item.reference, "e", error, "n", std::to_string(deliveries),
                      "p", std::string(PriorityName(item.priority))});
    Acknowledge(item.priority, item.id);
    metrics_.WorkDeadLettered(PriorityName(item.priority));
    Log("dead-lettered " + item.reference + " after " + std::to_string(deliveries) +
        " deliveries: " + error);
  }

  void Acknowledge(Priority p, const std::string& id) {
    // XDEL as well: the stream's length is then what waits or runs (the bound of Add).
    client_->Command({"XACK", StreamKey(p), kGroup, id});
    client_->Command({"XDEL", StreamKey(p), id});
    client_->Command({"DEL", ErrorKey(id)});
  }

  void Known(const std::string& reference) {
    client_->Command({"EVAL", kJudgedScript, "1", kKnown, reference, std::to_string(kKnownLimit)});
  }

  // Moves `item`, while this consumer holds it, to the end of its stream (kRequeueScript);
  // false when it holds it no more.
  bool MoveToEnd(const WorkItem& item) {
    RedisReply r = client_->Command({"EVAL", kRequeueScript, "2", StreamKey(item.priority),
                                     ErrorKey(item.id), kGroup, item.id, item.digest,
                                     item.reference, item.identity, options_.consumer});
    return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  }

  void Up() {
    if (!down_.exchange(false)) return;
    Log("the work streams in Redis answer again");
    // What was judged meanwhile joins the known set, oldest first (Redis's clock dates it).
    auto flushed = unsent_known_.Flush([this](const std::string& reference) { Known(reference); });
    if (flushed.dropped > 0) metrics_.DegradedDropped("known", flushed.dropped);
    if (!flushed.error.empty()) Down(flushed.error);
    if (flushed.written > 0) {
      metrics_.DegradedReplayed("known", flushed.written);
      Log("wrote the " + std::to_string(flushed.written) +
          " digests judged while Redis did not answer to its known set");
    }
  }
  void Down(const std::string& why) {
    if (!down_.exchange(true))
      Log("the work streams in Redis fail (" + why + "): queueing in memory meanwhile");
  }

  std::shared_ptr<RedisClient> client_;
  StreamOptions options_;
  Metrics& metrics_;
  Waiting local_;  ///< self-claimed entries, and items queued while Redis is away
  std::atomic<bool> groups_ready_{false}, stopping_{false}, down_{false};
  std::mutex mu_;
  std::array<Clock::time_point, kPriorities> next_reclaim_{};
  std::set<std::string> held_;               ///< entry ids queued here or being scanned here
  std::map<std::string, WorkItem> refused_;  ///< by id: entries refused and kept (Refused)
  std::set<std::string> met_;  ///< "digest identity" of entries refused once (handed back then)
  Unsent<std::string> unsent_known_;  ///< references judged while Redis did not answer
};

}  // namespace

std::unique_ptr<WorkQueue> MakeLocalQueue(size_t limit) {
  return std::make_unique<LocalQueue>(limit);
}

std::unique_ptr<WorkQueue> MakeStreamQueue(std::shared_ptr<RedisClient> client,
                                           StreamOptions options, Metrics& metrics) {
  return std::make_unique<StreamQueue>(std::move(client), std::move(options), metrics);
}

}  // namespace imgcheck::serve::fleet

#include "serve/fleet/facts_store.h"

#include <chrono>

#include "serve/log.h"

namespace imgcheck::serve::fleet {

namespace {

constexpr const char* kPrefix = "imgcheck:facts:";
constexpr const char* kLru = "imgcheck:facts:lru";      // name -> last use (ms)
constexpr const char* kSizes = "imgcheck:facts:sizes";  // name -> bytes
constexpr const char* kTotal = "imgcheck:facts:bytes";  // the sum of kSizes

// KEYS: the entry, kLru, kSizes, kTotal; ARGV: the value, now, the bound. Stores the entry and
// evicts the least recently used others until the total is within the bound (the entry itself
// joins the order after, so it is never the one evicted for its own sake; alone over the bound,
// it is dropped); returns how many went. Sizes read back from Redis may be anything:
// tonumber's nil counts as 0.
constexpr const char* kPutScript = R"(
local bound = tonumber(ARGV[3])
local old = tonumber(redis.call('hget', KEYS[3], KEYS[1])) or 0
redis.call('set', KEYS[1], ARGV[1])
redis.call('hset', KEYS[3], KEYS[1], #ARGV[1])
redis.call('zrem', KEYS[2], KEYS[1])
local total = redis.call('incrby', KEYS[4], #ARGV[1] - old)
local evicted = 0
while total > bound do
  local oldest = redis.call('zpopmin', KEYS[2])
  if #oldest == 0 then break end
  local size = tonumber(redis.call('hget', KEYS[3], oldest[1])) or 0
  redis.call('del', oldest[1])
  redis.call('hdel', KEYS[3], oldest[1])
  total = redis.call('decrby', KEYS[4], size)
  evicted = evicted + 1
end
if total > bound then
  redis.call('del', KEYS[1])
  redis.call('hdel', KEYS[3], KEYS[1])
  redis.call('set', KEYS[4], 0)
else
  redis.call('zadd', KEYS[2], ARGV[2], KEYS[1])
end
return evicted)";

std::string NowMillis() {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
}

}  // namespace

FactsStore::FactsStore(std::shared_ptr<RedisClient> client, trust::VerdictSeal seal,
                       uint64_t max_bytes, Metrics& metrics)
    : client_(std::move(client)),
      seal_(std::move(seal)),
      max_bytes_(max_bytes),
      metrics_(metrics) {}

std::optional<std::string> FactsStore::Get(const std::string& name) {
  std::string key = kPrefix + name;
  std::string stored;
  try {
    // One byte more than an entry may hold with its seal's header line: a longer value is
    // refused without being read whole.
    constexpr size_t kRead = kMaxFactsEntry + 256;
    RedisReply r = client_->Command({"GETRANGE", key, "0", std::to_string(kRead)});
    if (r->type != REDIS_REPLY_STRING) throw util::Fatal("redis: GETRANGE answered no string");
    stored.assign(r->str, r->len);
    if (stored.empty()) {  // GETRANGE answers "" for a missing key
      Answered();
      metrics_.Facts("miss", 0);
      return std::nullopt;
    }
    if (stored.size() > kRead) {
      Answered();
      Discard(name, "is larger than an entry may be");
      return std::nullopt;
    }
    client_->Command({"ZADD", kLru, "XX", NowMillis(), key});  // most recently used now
    Answered();
  } catch (const util::Fatal& e) {
    Failed(e);
    return std::nullopt;
  }
  std::string value;
  if (trust::VerdictSeal::Check c = seal_.Open(key, stored, value);
      c != trust::VerdictSeal::Check::kOk) {
    metrics_.FactsRejected(CheckName(c));
    Log("facts entry " + name + " failed its seal (" + std::string(CheckName(c)) +
        "): ignored (read from the registry)");
    return std::nullopt;
  }
  metrics_.Facts("hit", value.size());
  return value;
}

void FactsStore::Put(const std::string& name, std::string_view value) {
  if (value.size() > kMaxFactsEntry || value.size() > max_bytes_) return;
  std::string key = kPrefix + name;
  try {
    RedisReply r = client_->Command({"EVAL", kPutScript, "4", key, kLru, kSizes, kTotal,
                                     seal_.Seal(key, std::string(value)), NowMillis(),
                                     std::to_string(max_bytes_)});
    Answered();
    metrics_.FactsStored(value.size(), r->type == REDIS_REPLY_INTEGER ? r->integer : 0);
  } catch (const util::Fatal& e) {
    Failed(e);
  }
}

void FactsStore::Discard(const std::string& name, std::string_view why) {
  metrics_.FactsRejected("invalid");
  Log("facts entry " + name + " " + std::string(why) + ": ignored (read from the registry)");
}

void FactsStore::Failed(const util::Fatal& e) {
  if (!failing_.exchange(true)) Log(std::string("facts store: ") + e.what());
}

void FactsStore::Answered() {
  if (failing_.exchange(false)) Log("facts store: Redis answers again");
}

}  // namespace imgcheck::serve::fleet

#include "serve/fleet/redis_store.h"

#include <openssl/rand.h>

#include <map>
#include <mutex>
#include <vector>

#include "serve/fleet/redis_client.h"

namespace imgcheck::serve::fleet {

namespace {

// The lock scripts (KEYS[1] the lock, ARGV[1] our token): each acts only while the lock is ours.
constexpr const char* kRenewScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr const char* kUnlockScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

class RedisStore : public SharedStore {
 public:
  explicit RedisStore(std::shared_ptr<RedisClient> client) : client_(std::move(client)) {}

  std::optional<std::string> Get(const std::string& key) override {
    RedisReply r = client_->Command({"GET", key});
    if (r->type == REDIS_REPLY_NIL) return std::nullopt;
    if (r->type != REDIS_REPLY_STRING) throw util::Fatal("redis: GET answered no string");
    return std::string(r->str, r->len);
  }

  void Put(const std::string& key, const std::string& value, std::chrono::seconds ttl) override {
    client_->Command({"SET", key, value, "EX", std::to_string(ttl.count())});
  }

  bool Lock(const std::string& key, std::chrono::milliseconds ttl) override {
    unsigned char raw[16];
    RAND_bytes(raw, sizeof raw);
    std::string token;
    for (unsigned char b : raw)
      token += "0123456789abcdef"[b >> 4], token += "0123456789abcdef"[b & 15];
    RedisReply r = client_->Command({"SET", key, token, "NX", "PX", std::to_string(ttl.count())});
    if (r->type != REDIS_REPLY_STATUS) return false;  // nil: someone else holds it
    std::lock_guard lock(mu_);
    tokens_[key] = token;
    return true;
  }

  bool Renew(const std::string& key, std::chrono::milliseconds ttl) override {
    std::string token;
    {
      std::lock_guard lock(mu_);
      auto it = tokens_.find(key);
      if (it == tokens_.end()) return false;
      token = it->second;
    }
    RedisReply r =
        client_->Command({"EVAL", kRenewScript, "1", key, token, std::to_string(ttl.count())});
    return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  }

  void Unlock(const std::string& key) override {
    std::string token;
    {
      std::lock_guard lock(mu_);
      auto it = tokens_.find(key);
      if (it == tokens_.end()) return;
      token = it->second;
      tokens_.erase(it);
    }
    // Delete only our own lock: it may have lapsed and been taken by another replica.
    client_->Command({"EVAL", kUnlockScript, "1", key, token});
  }

  bool Ping() override {
    try {
      RedisReply r = client_->Command({"PING"});
      return r->type == REDIS_REPLY_STATUS;
    } catch (const util::Fatal&) {
      return false;
    }
  }

 private:
  std::shared_ptr<RedisClient> client_;
  std::mutex mu_;
  std::map<std::string, std::string> tokens_;
};

}  // namespace

std::unique_ptr<SharedStore> OpenRedisStore(std::shared_ptr<RedisClient> client) {
  return std::make_unique<RedisStore>(std::move(client));
}

util::Expected<std::unique_ptr<SharedStore>> OpenRedis(const std::string& url,
                                                       const std::string& password) {
  auto client = RedisClient::Open(url, password);
  if (!client) return client.error();
  return OpenRedisStore(std::move(*client));
}

}  // namespace imgcheck::serve::fleet

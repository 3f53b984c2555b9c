#include "serve/redis_store.h"

#include <hiredis/hiredis.h>
#include <openssl/rand.h>

#include <map>
#include <mutex>
#include <vector>

#include "util/text.h"

namespace imgcheck::serve {

namespace {

constexpr timeval kTimeout = {2, 0};  // connect and each command: Redis answers in microseconds
// The lock scripts (KEYS[1] the lock, ARGV[1] our token): each acts only while the lock is ours.
constexpr const char* kRenewScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr const char* kUnlockScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

struct Endpoint {
  std::string host = "127.0.0.1", password;
  int port = 6379, db = 0;
};

util::Expected<Endpoint> ParseRedisUrl(const std::string& url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.rfind(kScheme, 0) != 0) return util::MakeError("--redis: '" + url + "' is not redis://");
  std::string rest = url.substr(kScheme.size());
  Endpoint e;
  if (size_t at = rest.rfind('@'); at != std::string::npos) {
    std::string auth = rest.substr(0, at);
    e.password = auth.substr(auth.find(':') == std::string::npos ? 0 : auth.find(':') + 1);
    rest = rest.substr(at + 1);
  }
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      if (db.size() > 4 || db.find_first_not_of("0123456789") != std::string::npos)
        return util::MakeError("--redis: database '" + db + "' is not a number");
      e.db = std::stoi(db);
    }
  }
  if (size_t colon = rest.rfind(':'); colon != std::string::npos) {
    std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535)
      return util::MakeError("--redis: port '" + port + "' is not a port number");
    e.port = std::stoi(port);
    rest = rest.substr(0, colon);
  }
  if (!rest.empty()) e.host = rest;
  return e;
}

using Reply = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

class RedisStore : public SharedStore {
 public:
  explicit RedisStore(Endpoint e) : endpoint_(std::move(e)) {}
  ~RedisStore() override {
    for (redisContext* c : idle_) redisFree(c);
  }

  std::optional<std::string> Get(const std::string& key) override {
    Reply r = Command({"GET", key});
    if (r->type == REDIS_REPLY_NIL) return std::nullopt;
    if (r->type != REDIS_REPLY_STRING) throw util::Fatal("redis: GET answered no string");
    return std::string(r->str, r->len);
  }

  void Put(const std::string& key, const std::string& value, std::chrono::seconds ttl) override {
    Command({"SET", key, value, "EX", std::to_string(ttl.count())});
  }

  bool Lock(const std::string& key, std::chrono::milliseconds ttl) override {
    unsigned char raw[16];
    RAND_bytes(raw, sizeof raw);
    std::string token;
    for (unsigned char b : raw)
      token += "0123456789abcdef"[b >> 4], token += "0123456789abcdef"[b & 15];
    Reply r = Command({"SET", key, token, "NX", "PX", std::to_string(ttl.count())});
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
    Reply r = Command({"EVAL", kRenewScript, "1", key, token, std::to_string(ttl.count())});
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
    Command({"EVAL", kUnlockScript, "1", key, token});
  }

  bool Ping() override {
    try {
      Reply r = Command({"PING"});
      return r->type == REDIS_REPLY_STATUS;
    } catch (const util::Fatal&) {
      return false;
    }
  }

 private:
  // Runs one command on an idle connection (opening one when none is idle). A pooled
  // connection may have died with the server since its last use: one that fails is dropped and
  // the command sent once more on a new one (every command here may be sent twice).
  Reply Command(const std::vector<std::string>& args) {
    bool pooled = false;
    redisContext* c = Acquire(&pooled);
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* raw = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
    if (raw == nullptr) {
      std::string why = c->errstr;
      redisFree(c);
      if (pooled) return Command(args);
      throw util::Fatal("redis " + Where() + ": " + args[0] + ": " + why);
    }
    Release(c);
    Reply r(raw, freeReplyObject);
    if (r->type == REDIS_REPLY_ERROR)
      throw util::Fatal("redis " + Where() + ": " + args[0] + ": " + std::string(r->str, r->len));
    return r;
  }

  redisContext* Acquire(bool* pooled) {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        redisContext* c = idle_.back();
        idle_.pop_back();
        *pooled = true;
        return c;
      }
    }
    redisContext* c = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, kTimeout);
    if (c == nullptr || c->err) {
      std::string why = c ? c->errstr : "out of memory";
      if (c) redisFree(c);
      throw util::Fatal("redis " + Where() + ": cannot connect: " + why);
    }
    redisSetTimeout(c, kTimeout);
    auto setup = [&](std::vector<std::string> args) {
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
      Reply r(static_cast<redisReply*>(
                  redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())),
              freeReplyObject);
      if (!r || r->type == REDIS_REPLY_ERROR) {
        std::string why = r ? std::string(r->str, r->len) : std::string(c->errstr);
        redisFree(c);
        throw util::Fatal("redis " + Where() + ": " + args[0] + ": " + why);
      }
    };
    if (!endpoint_.password.empty()) setup({"AUTH", endpoint_.password});
    if (endpoint_.db != 0) setup({"SELECT", std::to_string(endpoint_.db)});
    return c;
  }

  void Release(redisContext* c) {
    std::lock_guard lock(mu_);
    idle_.push_back(c);
  }

  std::string Where() const { return endpoint_.host + ":" + std::to_string(endpoint_.port); }

  Endpoint endpoint_;
  std::mutex mu_;
  std::vector<redisContext*> idle_;
  std::map<std::string, std::string> tokens_;
};

}  // namespace

util::Expected<std::unique_ptr<SharedStore>> OpenRedis(const std::string& url,
                                                       const std::string& password) {
  auto e = ParseRedisUrl(url);
  if (!e) return e.error();
  if (!password.empty()) e->password = password;
  return std::unique_ptr<SharedStore>(std::make_unique<RedisStore>(*e));
}

}  // namespace imgcheck::serve

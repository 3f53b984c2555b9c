// The verdict store replicas share (`--redis URL`): verdicts by key, and a lock per key so that
// one replica scans a digest while the others wait for its verdict (SET NX with an expiry, so a
// crashed scanner's lock lapses).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "serve/fleet/redis_client.h"
#include "util/error.h"

namespace imgcheck::serve::fleet {

class SharedStore {
 public:
  virtual ~SharedStore() = default;
  /// The stored value, nullopt when there is none. Throws util::Fatal when the store fails.
  virtual std::optional<std::string> Get(const std::string& key) = 0;
  virtual void Put(const std::string& key, const std::string& value, std::chrono::seconds ttl) = 0;
  /// True when this caller now holds `key`'s lock (for `ttl` at most).
  virtual bool Lock(const std::string& key, std::chrono::milliseconds ttl) = 0;
  /// Extends this caller's lock on `key` to `ttl` from now; false when it holds it no more.
  virtual bool Renew(const std::string& key, std::chrono::milliseconds ttl) = 0;
  virtual void Unlock(const std::string& key) = 0;
  /// True when the store answers.
  virtual bool Ping() = 0;
};

/// The store over `client`'s Redis.
std::unique_ptr<SharedStore> OpenRedisStore(std::shared_ptr<RedisClient> client);
/// A store on Redis at `url` ("redis://[:PASSWORD@]HOST[:PORT][/DB]"); `password`, when not
/// empty, is sent with AUTH instead of the URL's (--redis-password-file, so that the secret
/// stays out of the command line); see RedisClient.
util::Expected<std::unique_ptr<SharedStore>> OpenRedis(const std::string& url,
                                                       const std::string& password = "");

}  // namespace imgcheck::serve::fleet

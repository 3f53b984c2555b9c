// A connection to Redis (`--redis URL`) shared by the stores over it (verdicts, work, facts):
// connections opened on demand, one per calling thread at a time (hiredis contexts are not
// thread-safe), and pooled; a pooled one that fails (Redis restarted) is replaced and the
// command sent again.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "util/error.h"

namespace imgcheck::serve::fleet {

using RedisReply = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

class RedisClient {
 public:
  /// `url`: "redis://[:PASSWORD@]HOST[:PORT][/DB]"; `password`, when not empty, is sent with
  /// AUTH instead of the URL's (--redis-password-file, so that the secret stays out of the
  /// command line).
  static util::Expected<std::shared_ptr<RedisClient>> Open(const std::string& url,
                                                           const std::string& password = "");
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  /// Runs one command; throws util::Fatal when Redis cannot be reached or answers an error.
  /// Every command sent through it may be sent twice (a pooled connection found dead).
  RedisReply Command(const std::vector<std::string>& args);
  /// "HOST:PORT", for messages.
  std::string Where() const;

 private:
  struct Endpoint {
    std::string host = "127.0.0.1", password;
    int port = 6379, db = 0;
  };
  explicit RedisClient(Endpoint e) : endpoint_(std::move(e)) {}
  static util::Expected<Endpoint> ParseUrl(const std::string& url);
  redisContext* Acquire(bool* pooled);
  void Release(redisContext* c);

  Endpoint endpoint_;
  std::mutex mu_;
  std::vector<redisContext*> idle_;
};

}  // namespace imgcheck::serve::fleet

#include "serve/fleet/redis_client.h"

namespace imgcheck::serve::fleet {

namespace {

constexpr timeval kTimeout = {2, 0};  // connect and each command: Redis answers in microseconds

redisReply* Send(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
}

}  // namespace

util::Expected<RedisClient::Endpoint> RedisClient::ParseUrl(const std::string& url) {
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

util::Expected<std::shared_ptr<RedisClient>> RedisClient::Open(const std::string& url,
                                                               const std::string& password) {
  auto e = ParseUrl(url);
  if (!e) return e.error();
  if (!password.empty()) e->password = password;
  return std::shared_ptr<RedisClient>(new RedisClient(std::move(*e)));
}

RedisClient::~RedisClient() {
  for (redisContext* c : idle_) redisFree(c);
}

// A pooled connection may have died with the server since its last use: one that fails is
// dropped and the command sent once more on a new one.
RedisReply RedisClient::Command(const std::vector<std::string>& args) {
  bool pooled = false;
  redisContext* c = Acquire(&pooled);
  auto* raw = Send(c, args);
  if (raw == nullptr) {
    std::string why = c->errstr;
    redisFree(c);
    if (pooled) return Command(args);
    throw util::Fatal("redis " + Where() + ": " + args[0] + ": " + why);
  }
  Release(c);
  RedisReply r(raw, freeReplyObject);
  if (r->type == REDIS_REPLY_ERROR)
    throw util::Fatal("redis " + Where() + ": " + args[0] + ": " + std::string(r->str, r->len));
  return r;
}

redisContext* RedisClient::Acquire(bool* pooled) {
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
  auto setup = [&](const std::vector<std::string>& args) {
    RedisReply r(Send(c, args), freeReplyObject);
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

void RedisClient::Release(redisContext* c) {
  std::lock_guard lock(mu_);
  idle_.push_back(c);
}

std::string RedisClient::Where() const {
  return endpoint_.host + ":" + std::to_string(endpoint_.port);
}

}  // namespace imgcheck::serve::fleet

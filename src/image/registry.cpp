// The registry transport over the OCI distribution API v2 (distribution-spec "Pulling").
// Each request goes through Client::Send, the one place that authenticates (RFC 7235
// challenges: Basic, or Bearer tokens from the realm, docker "token authentication"),
// follows redirects hop by hop (credentials only to the origin they were meant for; where a hop
// may go is the rule of README "Credentials and redirects"), and retries 429/5xx and broken
// connections with exponential back-off and Retry-After.
#include "image/registry.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "image/curl_lib.h"
#include "image/manifest.h"
#include "image/registry_auth.h"
#include "image/registry_http.h"
#include "image/registry_reference.h"
#include "util/error.h"
#include "util/file.h"
#include "util/limits.h"
#include "util/sha256.h"
#include "util/text.h"

namespace imgcheck::image {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kMaxTries = 5;  // per request, and per blob for resumes
constexpr int kMaxRedirects = 10;
constexpr milliseconds kFirstDelay{250};
constexpr milliseconds kMaxDelay{8000};
constexpr milliseconds kMaxRetryAfter{60000};
constexpr uint64_t kMaxManifestBytes = 4 << 20;
constexpr uint64_t kMaxSmallBody = 1 << 20;  // token answers, error bodies, tag lists
constexpr size_t kTagsShown = 20;

constexpr const char* kOciManifest = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kOciIndex = "application/vnd.oci.image.index.v1+json";
constexpr const char* kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
constexpr const char* kDockerList = "application/vnd.docker.distribution.manifest.list.v2+json";
constexpr const char* kAcceptManifests =
    "Accept: application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json";

bool IsManifestType(std::string_view t) {
  return t == kOciManifest || t == kOciIndex || t == kDockerManifest || t == kDockerList;
}

bool IsSchema1(std::string_view t) {
  return t.starts_with("application/vnd.docker.distribution.manifest.v1");
}

// A digest that may go into a URL path: nothing but sha256 and 64 hex digits.
void RequireSha256Digest(const std::string& digest, const std::string& where) {
  if (!util::IsSha256Digest(digest))
    throw util::Fatal(where + ": bad digest '" + digest.substr(0, 80) + "'");
}

// Registry-provided text, made safe for a one-line message: control characters as spaces, at
// most `max` bytes.
std::string ClipRegistryText(std::string_view s, size_t max = 200) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c != 0x7f) ? c : ' ';
  return out;
}

milliseconds Backoff(int attempt) {
  return std::min(kMaxDelay, kFirstDelay * (1 << std::min(attempt, 10)));
}

// Retry-After: delta-seconds or an HTTP-date (RFC 9110 10.2.3); zero when absent or unreadable.
milliseconds ParseRetryAfter(const std::string& v) {
  if (v.empty()) return milliseconds{0};
  if (v.size() <= 9 &&
      std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return milliseconds{std::stoll(v) * 1000};
  }
  const CurlLib* curl = Curl();  // loaded: a response came
  time_t when = curl != nullptr ? curl->getdate(v.c_str(), nullptr) : -1;
  if (when < 0) return milliseconds{0};
  int64_t secs = static_cast<int64_t>(when) - static_cast<int64_t>(time(nullptr));
  return milliseconds{std::max<int64_t>(secs, 0) * 1000};
}

// What the registry said in its error body ({"errors":[{"code":..,"message":..}]}).
struct RegistryError {
  std::string code, message;
};
RegistryError ParseRegistryError(const std::string& body) {
  RegistryError e;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("errors") && j["errors"].is_array() && !j["errors"].empty()) {
    const auto& first = j["errors"][0];
    if (first.is_object()) {
      if (first.contains("code") && first["code"].is_string()) e.code = first["code"];
      if (first.contains("message") && first["message"].is_string()) e.message = first["message"];
    }
  }
  return e;
}

bool IsLocalHost(const std::string& host_port) {
  std::string host = host_port;
  if (host.starts_with("[")) {
    host = host.substr(0, host.find(']') + 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  return host == "localhost" || host.starts_with("127.") || host == "[::1]";
}

// Whether `url`'s host and port are what `pattern` names: "host" (on the scheme's default
// port), "host:port", "[v6]:port", or "*.domain" (any host under domain, default port).
bool HostMatches(const std::string& url, const std::string& pattern) {
  std::string host, port;
  if (pattern.empty() || !UrlHostPort(url, host, port)) return false;
  std::string want_host = pattern, want_port;
  if (pattern[0] == '[') {
    size_t close = pattern.find(']');
    if (close != std::string::npos && pattern.compare(close + 1, 1, ":") == 0) {
      want_host = pattern.substr(0, close + 1);
      want_port = pattern.substr(close + 2);
    }
  } else if (std::count(pattern.begin(), pattern.end(), ':') == 1) {
    want_host = pattern.substr(0, pattern.find(':'));
    want_port = pattern.substr(pattern.find(':') + 1);
  }
  if (want_port.empty() ? (port != "443" && port != "80") : port != want_port) return false;
  if (want_host.starts_with("*.")) {
    std::string suffix = want_host.substr(1);
    return host.size() > suffix.size() && host.ends_with(suffix);
  }
  return host == want_host;
}

// What a request fetches, which decides where its redirects may go.
enum class Fetch {
  kApi,    ///< /v2/, manifests, tags: the registry's origin, or an --allow-registry host
  kToken,  ///< the token realm: its own origin, or an --allow-registry host
  kBlob,   ///< blobs: the registry's origin, an --allow-blob-host, or (unrestricted) anywhere
};

// Tokens are kept for the whole process, per realm, service, scope and user.
struct TokenCache {
  std::mutex mu;
  std::map<std::string, std::pair<std::string, Clock::time_point>> tokens;
  static TokenCache& Get() {
    static TokenCache cache;
    return cache;
  }
};

std::string ReadTextFile(const std::filesystem::path& p, const std::string& what) {
  util::Expected<std::string> text = util::ReadFile(p);
  if (!text) throw util::Fatal(what + ": " + text.error().message);
  return std::move(text).value();
}

// --ca-cert, and a certs.d-style directory (containers-certs.d(5)): *.crt are CAs, a *.cert
// with its *.key is the client certificate.
TlsOptions MakeTls(const RegistryOptions& o, const std::string& domain) {
  TlsOptions tls;
  tls.verify = o.tls_verify;
  if (!o.ca_cert.empty()) tls.ca_pem = ReadTextFile(o.ca_cert, "--ca-cert file") + "\n";
  std::string dir = o.cert_dir;
  if (dir.empty()) {
    for (std::string d : {"/etc/containers/certs.d/", "/etc/docker/certs.d/"}) {
      std::error_code ec;
      if (std::filesystem::is_directory(d + domain, ec)) {
        dir = d + domain;
        break;
      }
    }
  }
  if (dir.empty()) return tls;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    files.push_back(entry.path());
  if (ec && !o.cert_dir.empty())
    throw util::Fatal("cannot read --cert-dir " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    if (f.extension() == ".crt") tls.ca_pem += ReadTextFile(f, "CA certificate") + "\n";
    if (f.extension() == ".cert") {
      std::filesystem::path key = f;
      key.replace_extension(".key");
      if (!std::filesystem::exists(key, ec)) {
        throw util::Fatal("client certificate " + f.string() + " has no " +
                          key.filename().string());
      }
      tls.client_cert = f.string();
      tls.client_key = key.string();
    }
  }
  return tls;
}

class Client {
 public:
  Client(Reference ref, const RegistryOptions& options)
      : ref_(std::move(ref)),
        host_(ref_.ApiHost()),
        tls_(MakeTls(options, ref_.domain)),
        cred_(FindCredential(ref_.domain, options.credentials)),
        sleep_(options.sleep),
        pace_(options.pace),
        connections_(options.connections),
        deadline_s_(options.deadline_s) {
    for (const auto& r : options.allow_registries) {
      util::Expected<Reference> allowed = ParseReference(r + "/x");
      allow_registries_.push_back(util::AsciiLower(allowed ? allowed->ApiHost() : r));
    }
    for (const auto& h : options.allow_blob_hosts) allow_blob_hosts_.push_back(util::AsciiLower(h));
    bounds_.read_timeout = std::chrono::seconds(options.read_timeout_s);
    // --min-rate over the window, saturating (the flag is the user's, unbounded).
    const auto window = static_cast<uint64_t>(std::max(1, options.read_timeout_s));
    bounds_.min_bytes = options.min_rate > UINT64_MAX / window
                            ? UINT64_MAX
                            : std::max(kMinStallBytes, options.min_rate * window);
    bounds_.deadline = Clock::now() + std::chrono::seconds(options.deadline_s);
    Ping();
  }

  const Reference& ref() const { return ref_; }
  /// Waits `d` before a retry.
  void Sleep(milliseconds d) const {
    if (Clock::now() + d >= bounds_.deadline) DeadlinePassed();
    if (sleep_) {
      sleep_(d);
    } else {
      std::this_thread::sleep_for(d);
    }
  }
  /// Throws the --deadline error.
  [[noreturn]] void DeadlinePassed() const {
    util::LimitExceeded("reading " + ref_.String() + " from " + host_,
                        std::to_string(deadline_s_) + " s", "--deadline");
  }
  /// Throws the --deadline error when `ex` stopped at the deadline.
  void CheckDeadline(const HttpExchange& ex) const {
    if (ex.error() == TransportError::kDeadline) DeadlinePassed();
  }
  std::string RepoUrl(const std::string& rest) const {
    return origin_url_ + "/v2/" + ref_.path + "/" + rest;
  }
  std::string ApiUrl(const std::string& rest) const { return origin_url_ + "/v2/" + rest; }
  /// Waits for the caller's pace (RegistryOptions::pace) before a request.
  void Pace() const {
    if (pace_) pace_();
  }

  /// A page of a listing (`key`: "repositories" or "tags") at `url`: its names, and the next
  /// page's URL from its Link header. util::Fatal when the registry will not list `what`, the
  /// page is larger than 4 MiB or no listing, or its next page is elsewhere.
  ListingPage GetPage(const std::string& url, const char* key, const std::string& what) {
    auto ex = Send("GET", url, {"Accept: application/json"});
    if (ex->status() != 200) Fail(what, *ex);
    std::string body;
    if (!ex->ReadAll(body, kMaxSmallBody * 4))
      throw util::Fatal(what + " on " + host_ + ": a page larger than 4 MiB");
    CheckDeadline(*ex);
    if (ex->error() != TransportError::kNone)
      throw util::Fatal("reading " + what + " from " + host_ + " broke: " + ex->error_message());
    nlohmann::json j = ParseJson(body, kMaxSmallBody * 4, what + " on " + host_);
    // A repository without tags may answer "tags": null.
    if (!j.is_object() || !j.contains(key) || !(j[key].is_array() || j[key].is_null()))
      throw util::Fatal(what + " on " + host_ + ": the page is not a listing");
    ListingPage page;
    if (j[key].is_array())
      for (const auto& n : j[key])
        if (n.is_string()) page.names.push_back(n.get<std::string>());
    util::Expected<std::string> next = NextPageUrl(ex->url(), ex->Header("link"));
    if (!next) throw util::Fatal(what + " on " + host_ + ": " + next.error().message);
    page.next = std::move(*next);
    return page;
  }

  /// Sends a request and returns it with its final response headers in: authenticated,
  /// redirected and retried as needed. Redirects are followed here, one hop at a time, each hop
  /// checked by CheckRedirect; the registry's Authorization goes only to the registry's origin,
  /// and `token_auth` (the Basic credential for the realm of a kToken request) only to the
  /// origin of `url`. Throws util::Fatal when retries run out or a redirect is refused.
  std::unique_ptr<HttpExchange> Send(const std::string& method, const std::string& url,
                                     const std::vector<std::string>& headers,
                                     Fetch fetch = Fetch::kApi, const std::string& token_auth = "",
                                     const std::string& body = {}) {
    const std::string start_origin = fetch == Fetch::kToken ? UrlOrigin(url) : origin_;
    std::string current = url;
    int tries = 0, redirects = 0, auth_rounds = 0;
    for (;;) {
      HttpRequest req{method, current, headers, body};
      bool own_origin = UrlOrigin(current) == start_origin;
      std::string sent_auth;
      if (fetch != Fetch::kToken && own_origin) {
        std::lock_guard lock(auth_mu_);
        sent_auth = authorization_;
      } else if (fetch == Fetch::kToken && own_origin) {
        sent_auth = token_auth;
      }
      if (!sent_auth.empty()) req.headers.push_back(sent_auth);
      Pace();
      auto ex = std::make_unique<HttpExchange>(req, tls_, "", bounds_, ShareFor(current));
      milliseconds delay{0};
      if (!ex->WaitHeaders()) {
        std::string problem = TransportProblem(*ex);  // throws for what a retry cannot fix
        if (++tries >= kMaxTries) {
          std::string where = current.starts_with(origin_url_) ? host_ : UrlOrigin(current);
          throw util::Fatal("cannot reach " + where + ": " + problem + " (" +
                            std::to_string(tries) +
                            " tries; network down, or the registry is not running?)");
        }
      } else {
        long st = ex->status();
        if (st == 401 && fetch != Fetch::kToken && own_origin && auth_rounds < 2 &&
            Authenticate(*ex, sent_auth)) {
          ++auth_rounds;
          continue;
        }
        if (st == 301 || st == 302 || st == 303 || st == 307 || st == 308) {
          std::string next = ResolveUrl(current, ex->Header("location"));
          if (next.empty() || ++redirects > kMaxRedirects) {
            throw util::Fatal(host_ + ": bad or endless redirect for " + url);
          }
          CheckRedirect(fetch, start_origin, current, next);
          current = next;
          continue;
        }
        if (st != 429 && st != 500 && st != 502 && st != 503 && st != 504) return ex;
        delay = ParseRetryAfter(ex->Header("retry-after"));
        if (++tries >= kMaxTries || delay > kMaxRetryAfter) {
          if (st == 429) {
            if (delay > kMaxRetryAfter) {  // not worth waiting for here
              throw util::Fatal("rate limited by " + host_ + " (HTTP 429, retry after " +
                                std::to_string(delay.count() / 1000) +
                                " s); try again later, or log in for a higher limit");
            }
            throw util::Fatal("rate limited by " + host_ + " (HTTP 429, " + std::to_string(tries) +
                              " tries); wait and try again, or log in for a higher limit");
          }
          return ex;  // the caller reports the server error with its body
        }
      }
      Sleep(std::max(delay, Backoff(tries - 1)));
    }
  }

  /// A one-line error for a response that is not what `what` needed.
  [[noreturn]] void Fail(const std::string& what, HttpExchange& ex) {
    std::string body;
    ex.ReadAll(body, kMaxSmallBody);
    RegistryError e = ParseRegistryError(body);
    std::string detail =
        e.code.empty() ? "" : " (" + e.code + ": " + ClipRegistryText(e.message) + ")";
    long st = ex.status();
    if (st == 401) {
      std::string hint = cred_.anonymous()
                             ? "; it may not exist, or it needs credentials (--creds, docker login)"
                             : "";
      throw util::Fatal("unauthorized: " + host_ + " refused " + what + " for " + cred_.Describe() +
                        detail + hint);
    }
    if (st == 403) throw util::Fatal("access denied to " + what + " on " + host_ + detail);
    if (st == 404 && e.code == "NAME_UNKNOWN") {
      throw util::Fatal("unknown repository " + ref_.domain + "/" + ref_.path);
    }
    if (st == 404) throw util::Fatal(what + " not found on " + host_ + detail);
    throw util::Fatal(host_ + " answered HTTP " + std::to_string(st) + " for " + what + detail);
  }

  /// The repository's tags, the first `max` + 1 the registry lists; empty when it will not
  /// say. Sets `repo_unknown` when the registry says there is no such repository (a registry
  /// may answer MANIFEST_UNKNOWN for a manifest of a repository it does not have).
  std::vector<std::string> ListTags(size_t max, bool& repo_unknown) {
    std::vector<std::string> tags;
    repo_unknown = false;
    try {
      auto ex = Send("GET", RepoUrl("tags/list"), {"Accept: application/json"});
      std::string body;
      bool complete = ex->ReadAll(body, kMaxSmallBody * 4);
      if (ex->status() == 404) repo_unknown = ParseRegistryError(body).code == "NAME_UNKNOWN";
      if (ex->status() != 200 || !complete) return tags;
      nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
      if (!j.is_object() || !j.contains("tags") || !j["tags"].is_array()) return tags;
      for (const auto& t : j["tags"]) {
        if (t.is_string()) tags.push_back(ClipRegistryText(t.get<std::string>(), 128));
        if (tags.size() > max) break;
      }
    } catch (const util::Fatal&) {
    }
    return tags;
  }

 private:
  // Where a redirect from `from` to `next` may go (README "Credentials and redirects"): the
  // origin the request started at, always; for API and token requests, an --allow-registry
  // host, or anywhere when there is no allow-list; for blobs, an --allow-blob-host, or anywhere
  // when neither list is set. Credentials never follow: Send gives them to their origin only.
  void CheckRedirect(Fetch fetch, const std::string& start_origin, const std::string& from,
                     const std::string& next) const {
    if (UrlOrigin(next) == start_origin) return;
    auto any_matches = [&next](const std::vector<std::string>& patterns) {
      return std::any_of(patterns.begin(), patterns.end(),
                         [&next](const std::string& p) { return HostMatches(next, p); });
    };
    std::string hop = UrlOrigin(from) + " redirected " +
                      (fetch == Fetch::kBlob    ? "a blob request"
                       : fetch == Fetch::kToken ? "a token request"
                                                : "a request for " + ref_.String()) +
                      " to " + ClipRegistryText(UrlOrigin(next), 120);
    if (fetch != Fetch::kBlob) {
      if (allow_registries_.empty() || any_matches(allow_registries_)) return;
      throw util::Fatal(hop + ", which is not in --allow-registry");
    }
    if ((allow_registries_.empty() && allow_blob_hosts_.empty()) || any_matches(allow_blob_hosts_))
      return;
    throw util::Fatal(hop + ", which is neither the registry nor an --allow-blob-host");
  }

  // Classifies a transport failure: returns what to retry, throws for what a retry cannot fix.
  std::string TransportProblem(const HttpExchange& ex) {
    switch (ex.error()) {
      case TransportError::kDeadline:
        DeadlinePassed();
      case TransportError::kTls:
        throw util::Fatal("TLS failure talking to " + host_ + ": " + ex.error_message() +
                          "; trust its CA with --ca-cert FILE or --cert-dir DIR, or skip the "
                          "check with --tls-verify=false");
      case TransportError::kOther:
        throw util::Fatal("request to " + host_ + " failed: " + ex.error_message());
      case TransportError::kNone:
        return "no HTTP response";
      default:
        return ex.error_message();
    }
  }

  // Chooses https, or http for a registry that only speaks http where that is allowed (a local
  // or --tls-verify=false registry, like docker's insecure registries), then checks /v2/.
  void Ping() {
    if (std::string api = connections_ ? connections_->CheckedApi(host_) : ""; !api.empty()) {
      origin_url_ = api;
      origin_ = UrlOrigin(origin_url_);
      return;
    }
    origin_url_ = "https://" + host_;
    if (!tls_.verify || IsLocalHost(host_)) {
      Pace();
      HttpExchange https({"GET", origin_url_ + "/v2/", {}, {}}, tls_, "", bounds_,
                         ShareFor(origin_url_));
      if (!https.WaitHeaders() && https.error() != TransportError::kConnect) {
        Pace();
        HttpExchange http({"GET", "http://" + host_ + "/v2/", {}, {}}, tls_, "", bounds_,
                          ShareFor("http://" + host_));
        if (http.WaitHeaders() && (http.status() == 200 || http.status() == 401)) {
          origin_url_ = "http://" + host_;
        }
      }
    }
    origin_ = UrlOrigin(origin_url_);
    auto ex = Send("GET", origin_url_ + "/v2/", {});
    long st = ex->status();
    if (st == 404) {
      throw util::Fatal(host_ + " does not serve the registry API (GET /v2/ answered 404)");
    }
    if (st != 200 && st != 401 && st != 403) Fail("the API check /v2/", *ex);
    if (connections_) connections_->RememberApi(host_, origin_url_);
  }

  // Sets the Authorization header from a 401's challenge to a request sent with `sent`; false
  // when there is nothing new to try. Layers may be read on several threads at once.
  bool Authenticate(const HttpExchange& response, const std::string& sent) {
    std::lock_guard lock(auth_mu_);
    if (authorization_ != sent) return true;  // another thread has just renewed it
    for (const Challenge& c : ParseChallenges(response.Header("www-authenticate"))) {
      if (c.scheme == "bearer") {
        authorization_ = "Authorization: Bearer " + FetchToken(c);
        break;
      }
      if (c.scheme == "basic" && !cred_.anonymous()) {
        authorization_ =
            "Authorization: Basic " + Base64Encode(cred_.username + ":" + cred_.password);
        break;
      }
    }
    return authorization_ != sent;
  }

  std::string FetchToken(const Challenge& c) {
    auto param = [&](const char* k) {
      auto it = c.params.find(k);
      return it == c.params.end() ? std::string() : it->second;
    };
    std::string realm = param("realm"), service = param("service"), scope = param("scope");
    if (realm.empty()) throw util::Fatal(host_ + " asked for a bearer token without a realm");
    if (scope.empty()) scope = "repository:" + ref_.path + ":pull";
    // Keyed by the credential too (hashed), so other credentials never reuse a token.
    std::string key = realm + "\n" + service + "\n" + scope + "\n" +
                      util::Sha256Digest(cred_.username + ":" + cred_.password);
    TokenCache& cache = TokenCache::Get();
    {
      std::lock_guard lock(cache.mu);
      auto it = cache.tokens.find(key);
      if (it != cache.tokens.end() && Clock::now() < it->second.second) return it->second.first;
    }
    std::string url = realm + (realm.find('?') == std::string::npos ? "?" : "&");
    if (!service.empty()) url += "service=" + UrlEscape(service) + "&";
    url += "scope=" + UrlEscape(scope);
    // The credential goes to the realm the registry named (docker "token authentication"), but
    // in clear text only to the registry's own origin, and never on past a redirect.
    std::string basic;
    if (!cred_.anonymous() && (url.starts_with("https://") || UrlOrigin(url) == origin_)) {
      basic = "Authorization: Basic " + Base64Encode(cred_.username + ":" + cred_.password);
    }
    auto ex = Send("GET", url, {"Accept: application/json"}, Fetch::kToken, basic);
    if (ex->status() == 401 || ex->status() == 403) {
      throw util::Fatal("unauthorized: the token service " + UrlOrigin(realm) +
                        " refused a token for " + scope + " for " + cred_.Describe());
    }
    if (ex->status() != 200) Fail("a token for " + scope, *ex);
    std::string body;
    if (!ex->ReadAll(body, kMaxSmallBody))
      throw util::Fatal("token answer from " + realm + " is too large");
    Token t = ParseTokenResponse(body);
    if (t.value.empty())
      throw util::Fatal("the token service " + UrlOrigin(realm) + " answered without a token");
    std::lock_guard lock(cache.mu);
    cache.tokens[key] = {
        t.value, Clock::now() + std::chrono::seconds(std::max<int64_t>(t.expires_in - 5, 0))};
    return t.value;
  }

  // The warm connections of `url`'s origin, when the options keep them.
  ConnectionShare* ShareFor(const std::string& url) const {
    return connections_ ? connections_->For(UrlOrigin(url)) : nullptr;
  }

  Reference ref_;
  std::string host_;  // host[:port] the API is on, for messages
  TlsOptions tls_;
  HttpBounds bounds_;
  Credential cred_;
  std::function<void(milliseconds)> sleep_;
  std::function<void()> pace_;
  std::shared_ptr<ConnectionShares> connections_;
  int deadline_s_;
  std::string origin_url_;                     // "https://host:port"
  std::string origin_;                         // UrlOrigin(origin_url_): where credentials may go
  std::vector<std::string> allow_registries_;  // API hosts of --allow-registry, lower case
  std::vector<std::string> allow_blob_hosts_;  // --allow-blob-host, lower case
  std::mutex auth_mu_;
  std::string authorization_;  // "Authorization: ..." for the registry, or empty; auth_mu_
};

// Streams one blob or manifest by digest. A connection that breaks mid-body is picked up where
// it broke with a Range request (RFC 9110 14.2); a server that ignores the range has the bytes
// already delivered skipped. Never delivers more than the descriptor's size.
class RegistryBlobReader : public BlobReader {
 public:
  RegistryBlobReader(std::shared_ptr<Client> client, std::string url,
                     std::vector<std::string> headers, std::string what, int64_t size, Fetch fetch)
      : client_(std::move(client)),
        url_(std::move(url)),
        headers_(std::move(headers)),
        what_(std::move(what)),
        size_(size),
        fetch_(fetch) {
    Open();
  }

  size_t Read(char* buf, size_t n) override {
    if (n == 0) return 0;
    for (;;) {
      if (!ex_) Open();
      while (skip_ > 0) {
        char scratch[65536];
        size_t got = ex_->Read(scratch, std::min<uint64_t>(skip_, sizeof scratch));
        if (got == 0) break;
        skip_ -= got;
      }
      size_t got = skip_ > 0 ? 0 : ex_->Read(buf, n);
      if (got > 0) {
        delivered_ += got;
        if (size_ >= 0 && delivered_ > static_cast<uint64_t>(size_)) {
          throw util::Fatal(what_ + ": the registry sent more than its size of " +
                            std::to_string(size_) + " bytes");
        }
        return got;
      }
      client_->CheckDeadline(*ex_);
      bool broken = ex_->error() != TransportError::kNone;
      bool short_body = size_ >= 0 && delivered_ < static_cast<uint64_t>(size_);
      if (!broken && !short_body) return 0;
      std::string problem = broken ? ex_->error_message() : "body ended early";
      // Below --min-rate the registry is slow, not broken: give the reader back at once.
      if (broken && ex_->too_slow())
        throw util::Fatal(what_ + ": download from " + client_->ref().ApiHost() + " abandoned (" +
                          problem + ")");
      if (++resumes_ >= kMaxTries) {
        throw util::Fatal(what_ + ": download from " + client_->ref().ApiHost() + " broke " +
                          std::to_string(resumes_) + " times (" + problem + ")");
      }
      ex_.reset();
      client_->Sleep(Backoff(resumes_ - 1));
    }
  }

  std::string ReadAll(uint64_t limit) {
    std::string out;
    char chunk[65536];
    while (size_t n = Read(chunk, sizeof chunk)) {
      if (out.size() + n > limit) {
        throw util::Fatal(what_ + " is larger than " + std::to_string(limit) + " bytes");
      }
      out.append(chunk, n);
    }
    return out;
  }

 private:
  void Open() {
    std::vector<std::string> headers = headers_;
    if (delivered_ > 0) headers.push_back("Range: bytes=" + std::to_string(delivered_) + "-");
    ex_ = client_->Send("GET", url_, headers, fetch_);
    long st = ex_->status();
    if (delivered_ > 0 && st == 206) {
      std::string range = ex_->Header("content-range");  // "bytes START-END/TOTAL"
      if (!range.starts_with("bytes " + std::to_string(delivered_) + "-")) {
        throw util::Fatal(what_ + ": the registry resumed at the wrong offset (" +
                          ClipRegistryText(range) + ")");
      }
      return;
    }
    if (st == 200) {
      skip_ = delivered_;
      return;
    }
    if (st == 404) {
      std::string body;
      ex_->ReadAll(body, kMaxSmallBody);
      if (ParseRegistryError(body).code == "NAME_UNKNOWN") {
        throw util::Fatal("unknown repository " + client_->ref().domain + "/" +
                          client_->ref().path);
      }
      throw util::Fatal(what_ + " not found in " + client_->ref().domain + "/" +
                        client_->ref().path);
    }
    client_->Fail(what_, *ex_);
  }

  std::shared_ptr<Client> client_;
  std::string url_;
  std::vector<std::string> headers_;
  std::string what_;
  int64_t size_;
  Fetch fetch_;
  std::unique_ptr<HttpExchange> ex_;
  uint64_t delivered_ = 0;
  uint64_t skip_ = 0;
  int resumes_ = 0;
};

class RegistrySource : public Source {
 public:
  RegistrySource(Reference ref, const RegistryOptions& options)
      : client_(std::make_shared<Client>(std::move(ref), options)) {}

  std::string Describe() const override { return "docker://" + client_->ref().String(); }

  Descriptor Root() override {
    if (root_loaded_) return root_;
    const Reference& ref = client_->ref();
    auto ex = client_->Send("GET", client_->RepoUrl("manifests/" + ref.ManifestRef()),
                            {kAcceptManifests});
    if (ex->status() == 404) NotFound(*ex);
    if (ex->status() != 200) client_->Fail("the manifest of " + ref.String(), *ex);
    std::string body;
    if (!ex->ReadAll(body, kMaxManifestBytes)) {
      throw util::Fatal("the manifest of " + ref.String() + " is larger than 4 MiB");
    }
    client_->CheckDeadline(*ex);
    if (ex->error() != TransportError::kNone) {
      throw util::Fatal("reading the manifest of " + ref.String() +
                        " broke: " + ex->error_message());
    }
    std::string type = ex->Header("content-type");
    type = type.substr(0, type.find(';'));
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (!IsManifestType(type) && j.is_object() && j.contains("mediaType") &&
        j["mediaType"].is_string()) {
      type = j["mediaType"];
    }
    bool schema1 = IsSchema1(type) ||
                   (j.is_object() && j.contains("schemaVersion") && j["schemaVersion"] == 1);
    if (schema1) {
      throw util::Fatal(ref.String() +
                        " has a Docker schema 1 manifest, which imgcheck does not "
                        "read; push it again with a current client (schema 2 or OCI)");
    }
    if (!IsManifestType(type)) {
      throw util::Fatal(ref.String() + ": the registry answered '" + ClipRegistryText(type, 100) +
                        "', not an image manifest or index");
    }
    std::string digest = ref.digest;
    if (digest.empty()) digest = ex->Header("docker-content-digest");
    if (digest.empty()) digest = util::Sha256Digest(body);
    RequireSha256Digest(digest, ref.String());
    root_.media_type = type;
    root_.digest = digest;
    root_.size = static_cast<int64_t>(body.size());
    root_body_ = std::move(body);
    root_loaded_ = true;
    return root_;
  }

  std::string ReadBlob(const Descriptor& d, uint64_t limit) override {
    if (d.size >= 0 && static_cast<uint64_t>(d.size) > limit) {
      throw util::Fatal(Name(d) + " is " + std::to_string(d.size) + " bytes, more than the " +
                        std::to_string(limit) + " allowed");
    }
    if (root_loaded_ && d.digest == root_.digest && root_body_.size() <= limit) return root_body_;
    return Reader(d)->ReadAll(limit);
  }

  std::unique_ptr<BlobReader> OpenBlob(const Descriptor& d) override { return Reader(d); }

 private:
  static std::string Name(const Descriptor& d) {
    return (IsManifestType(d.media_type) ? "manifest " : "blob ") + d.digest;
  }

  std::unique_ptr<RegistryBlobReader> Reader(const Descriptor& d) {
    RequireSha256Digest(d.digest, Describe());
    bool manifest = IsManifestType(d.media_type);
    std::vector<std::string> headers;
    if (manifest) headers.push_back(kAcceptManifests);
    std::string url = client_->RepoUrl((manifest ? "manifests/" : "blobs/") + d.digest);
    return std::make_unique<RegistryBlobReader>(client_, url, headers, Name(d), d.size,
                                                manifest ? Fetch::kApi : Fetch::kBlob);
  }

  [[noreturn]] void NotFound(HttpExchange& ex) {
    const Reference& ref = client_->ref();
    std::string body;
    ex.ReadAll(body, kMaxSmallBody);
    std::string repo = ref.domain + "/" + ref.path;
    if (ParseRegistryError(body).code == "NAME_UNKNOWN")
      throw util::Fatal("unknown repository " + repo);
    if (!ref.digest.empty()) throw util::Fatal("manifest " + ref.digest + " not found in " + repo);
    bool repo_unknown = false;
    std::vector<std::string> tags = client_->ListTags(kTagsShown, repo_unknown);
    if (repo_unknown) throw util::Fatal("unknown repository " + repo);
    std::string msg = "unknown tag '" + ref.tag + "' in " + repo;
    if (!tags.empty()) {
      msg += "; it has: ";
      for (size_t i = 0; i < tags.size() && i < kTagsShown; ++i) msg += (i ? ", " : "") + tags[i];
      if (tags.size() > kTagsShown) msg += ", ...";
    }
    throw util::Fatal(msg);
  }

  std::shared_ptr<Client> client_;
  bool root_loaded_ = false;
  Descriptor root_;
  std::string root_body_;
};

// "?n=N" of a listing's first page, N within 1 and kMaxPageSize.
std::string PageQuery(size_t n) {
  return "?n=" + std::to_string(std::clamp<size_t>(n, 1, kMaxPageSize));
}

// The path of an absolute URL, without its query or fragment; "" when it is not one.
std::string UrlPath(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  size_t slash = url.find('/', scheme + 3);
  if (slash == std::string::npos) return "/";
  return url.substr(slash, url.find_first_of("?#", slash) - slash);
}

}  // namespace

util::Expected<std::string> NextPageUrl(const std::string& page_url, std::string_view link) {
  // link-value = "<" URI-Reference ">" *( OWS ";" OWS link-param ), link-values separated by
  // commas (RFC 8288 section 3); rel holds space-separated relation types.
  size_t at = 0;
  auto skip = [&](std::string_view chars) {
    while (at < link.size() && chars.find(link[at]) != std::string_view::npos) ++at;
  };
  while (at < link.size()) {
    skip(" \t,");
    if (at >= link.size() || link[at] != '<') return std::string();  // malformed: ignored
    size_t close = link.find('>', at);
    if (close == std::string_view::npos) return std::string();
    std::string target(link.substr(at + 1, close - at - 1));
    at = close + 1;
    bool next = false;
    for (;;) {  // the parameters, up to the next link-value
      skip(" \t");
      if (at >= link.size() || link[at] != ';') break;
      ++at;
      skip(" \t");
      size_t eq = link.find_first_of("=;,", at);
      std::string name = util::AsciiLower(std::string(
          link.substr(at, eq == std::string_view::npos ? std::string_view::npos : eq - at)));
      while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
      at = eq == std::string_view::npos ? link.size() : eq;
      std::string value;
      if (at < link.size() && link[at] == '=') {
        ++at;
        skip(" \t");
        if (at < link.size() && link[at] == '"') {
          size_t end = link.find('"', at + 1);
          if (end == std::string_view::npos) return std::string();
          value = link.substr(at + 1, end - at - 1);
          at = end + 1;
        } else {
          size_t end = link.find_first_of(";, \t", at);
          value =
              link.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
          at = end == std::string_view::npos ? link.size() : end;
        }
      }
      if (name != "rel") continue;
      for (size_t from = 0; from < value.size();) {
        size_t end = std::min(value.find(' ', from), value.size());
        next = next || util::AsciiLower(value.substr(from, end - from)) == "next";
        from = end + 1;
      }
    }
    if (!next) continue;
    std::string url = ResolveUrl(page_url, target);
    if (url.empty()) return std::string();
    if (UrlOrigin(url) != UrlOrigin(page_url))
      return util::MakeError("the next page is on another host (" +
                             ClipRegistryText(UrlOrigin(url), 120) + "), refused");
    if (UrlPath(url) != UrlPath(page_url))
      return util::MakeError("the next page is another listing (" +
                             ClipRegistryText(UrlPath(url), 120) + "), refused");
    return url;
  }
  return std::string();
}

struct Catalog::Impl {
  std::shared_ptr<Client> client;
};

Catalog::Catalog(const std::string& host, const RegistryOptions& options) {
  // The client is for one repository; the catalog's requests name none.
  util::Expected<Reference> ref = ParseReference(host + "/catalog");
  if (!ref) throw util::Fatal("registry '" + host + "': " + ref.error().message);
  impl_ = std::make_unique<Impl>(Impl{std::make_shared<Client>(std::move(ref.value()), options)});
}

Catalog::~Catalog() = default;

ListingPage Catalog::Repositories(const std::string& next, size_t n) {
  Client& client = *impl_->client;
  return client.GetPage(next.empty() ? client.ApiUrl("_catalog" + PageQuery(n)) : next,
                        "repositories", "the catalog");
}

struct Repository::Impl {
  std::shared_ptr<Client> client;
};

Repository::Repository(const std::string& reference, const RegistryOptions& options) {
  util::Expected<Reference> ref = ParseReference(reference);
  if (!ref) throw util::Fatal(ref.error().message);
  impl_ = std::make_unique<Impl>(Impl{std::make_shared<Client>(std::move(ref.value()), options)});
}

Repository::~Repository() = default;

std::string Repository::Name() const {
  const Reference& r = impl_->client->ref();
  return r.domain + "/" + r.path;
}

std::optional<Repository::Manifest> Repository::GetManifest(const std::string& tag_or_digest,
                                                            uint64_t limit) {
  Client& client = *impl_->client;
  bool by_digest = tag_or_digest.starts_with("sha256:");
  if (by_digest) RequireSha256Digest(tag_or_digest, Name());
  std::string what = "the manifest " + Name() + (by_digest ? "@" : ":") + tag_or_digest;
  auto ex = client.Send("GET", client.RepoUrl("manifests/" + tag_or_digest), {kAcceptManifests});
  if (ex->status() == 404) return std::nullopt;
  if (ex->status() != 200) client.Fail(what, *ex);
  Manifest m;
  if (!ex->ReadAll(m.body, limit))
    throw util::Fatal(what + " is larger than " + std::to_string(limit) + " bytes");
  client.CheckDeadline(*ex);
  if (ex->error() != TransportError::kNone)
    throw util::Fatal("reading " + what + " broke: " + ex->error_message());
  m.digest = util::Sha256Digest(m.body);
  if (by_digest && m.digest != tag_or_digest)
    throw util::Fatal(what + ": the registry served other bytes (digest " + m.digest + ")");
  m.media_type = ex->Header("content-type");
  m.media_type = m.media_type.substr(0, m.media_type.find(';'));
  nlohmann::json j = nlohmann::json::parse(m.body, nullptr, false);
  if (!IsManifestType(m.media_type) && j.is_object() && j.contains("mediaType") &&
      j["mediaType"].is_string()) {
    m.media_type = j["mediaType"];
  }
  return m;
}

std::string Repository::GetBlob(const std::string& digest, uint64_t limit) {
  RequireSha256Digest(digest, Name());
  std::string what = "blob " + digest + " of " + Name();
  RegistryBlobReader reader(impl_->client, impl_->client->RepoUrl("blobs/" + digest), {}, what, -1,
                            Fetch::kBlob);
  std::string bytes = reader.ReadAll(limit);
  if (util::Sha256Digest(bytes) != digest)
    throw util::Fatal(what + ": the registry served bytes of another digest");
  return bytes;
}

std::string Repository::PutBlob(const std::string& bytes) {
  Client& client = *impl_->client;
  std::string digest = util::Sha256Digest(bytes);
  auto head = client.Send("HEAD", client.RepoUrl("blobs/" + digest), {});
  if (head->status() == 200) return digest;  // already there (content-addressed)
  // A monolithic upload: POST opens the session, PUT with ?digest= closes it with the bytes.
  auto post = client.Send("POST", client.RepoUrl("blobs/uploads/"), {}, Fetch::kApi, "", "");
  if (post->status() != 202) client.Fail("a blob upload", *post);
  std::string location = ResolveUrl(post->url(), post->Header("location"));
  if (location.empty()) throw util::Fatal(client.ref().domain + " gave no upload location");
  location += std::string(location.find('?') == std::string::npos ? "?" : "&") +
              "digest=" + UrlEscape(digest);
  auto put = client.Send("PUT", location, {"Content-Type: application/octet-stream"}, Fetch::kApi,
                         "", bytes);
  if (put->status() != 201) client.Fail("the upload of blob " + digest, *put);
  return digest;
}

std::string Repository::PutManifest(const std::string& tag, const std::string& body,
                                    std::string_view media_type) {
  Put(tag, body, media_type);
  return util::Sha256Digest(body);
}

bool Repository::PutReferrer(const std::string& body, std::string_view media_type) {
  std::string digest = util::Sha256Digest(body);
  // distribution-spec 1.1 "Pushing Manifests with Subject": a registry that indexes the subject
  // answers with OCI-Subject naming it.
  return !Put(digest, body, media_type).empty();
}

std::string Repository::Put(const std::string& reference, const std::string& body,
                            std::string_view media_type) {
  Client& client = *impl_->client;
  auto put = client.Send("PUT", client.RepoUrl("manifests/" + reference),
                         {"Content-Type: " + std::string(media_type)}, Fetch::kApi, "", body);
  if (put->status() != 201) client.Fail("the manifest " + Name() + ":" + reference, *put);
  return put->Header("oci-subject");
}

std::optional<std::string> Repository::GetReferrers(const std::string& digest,
                                                    std::string_view artifact_type,
                                                    uint64_t limit) {
  RequireSha256Digest(digest, Name());
  Client& client = *impl_->client;
  std::string what = "the referrers of " + Name() + "@" + digest;
  std::string query =
      artifact_type.empty() ? "" : "?artifactType=" + UrlEscape(std::string(artifact_type));
  // Page by page as each page's Link header says (distribution-spec 1.1 "Listing Referrers":
  // a registry may page the list), on the registry's origin and this endpoint only, bounded in
  // pages and in bytes altogether; the manifests of all pages as one image index.
  std::string url = client.RepoUrl("referrers/" + digest + query);
  std::set<std::string> seen;
  nlohmann::json manifests = nlohmann::json::array();
  uint64_t read = 0;
  for (size_t page = 0;; ++page) {
    if (page == kMaxReferrerPages)
      throw util::Fatal(what + ": more than " + std::to_string(kMaxReferrerPages) + " pages");
    if (!seen.insert(url).second)
      throw util::Fatal(what + ": its pages loop (" + ClipRegistryText(UrlPath(url), 120) +
                        " again)");
    auto ex = client.Send("GET", url, {"Accept: application/vnd.oci.image.index.v1+json"});
    // No referrers API: the tag schema instead. 404 is the distribution spec's answer; 405 and
    // 501 are what registries that route no such endpoint answer.
    if (long s = ex->status(); page == 0 && (s == 404 || s == 405 || s == 501)) return std::nullopt;
    if (ex->status() != 200) client.Fail(what, *ex);
    std::string body;
    if (!ex->ReadAll(body, limit - read))
      throw util::Fatal(what + " is larger than " + std::to_string(limit) + " bytes");
    read += body.size();
    client.CheckDeadline(*ex);
    if (ex->error() != TransportError::kNone)
      throw util::Fatal("reading " + what + " broke: " + ex->error_message());
    nlohmann::json j = ParseJson(body, limit, what);
    if (!j.is_object() || !j.contains("manifests") || !j["manifests"].is_array())
      throw util::Fatal(what + ": page " + std::to_string(page + 1) + " is no image index");
    for (auto& m : j["manifests"]) manifests.push_back(std::move(m));
    util::Expected<std::string> next = NextPageUrl(ex->url(), ex->Header("link"));
    if (!next) throw util::Fatal(what + ": " + next.error().message);
    if (next->empty()) break;
    url = std::move(*next);
  }
  nlohmann::json index = {{"schemaVersion", 2},
                          {"mediaType", "application/vnd.oci.image.index.v1+json"},
                          {"manifests", std::move(manifests)}};
  return index.dump();
}

ListingPage Repository::Tags(const std::string& next, size_t n) {
  Client& client = *impl_->client;
  return client.GetPage(next.empty() ? client.RepoUrl("tags/list" + PageQuery(n)) : next, "tags",
                        "the tags of " + Name());
}

std::string PushToRegistry(const std::string& reference, const std::vector<std::string>& blobs,
                           const std::string& manifest, std::string_view media_type,
                           const RegistryOptions& options) {
  util::Expected<Reference> ref = ParseReference(reference);
  if (!ref) throw util::Fatal(ref.error().message);
  if (!ref->digest.empty()) throw util::Fatal("push to a tag, not a digest: " + reference);
  Repository repo(reference, options);
  for (const std::string& blob : blobs) repo.PutBlob(blob);
  return repo.PutManifest(ref->ManifestRef(), manifest, media_type);
}

std::unique_ptr<Source> OpenRegistry(const std::string& reference, const RegistryOptions& options) {
  util::Expected<Reference> ref = ParseReference(reference);
  if (!ref) throw util::Fatal(ref.error().message);
  return std::make_unique<RegistrySource>(std::move(ref.value()), options);
}

}  // namespace imgcheck::image

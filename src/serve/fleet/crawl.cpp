#include "serve/fleet/crawl.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "image/registry.h"
#include "image/registry_reference.h"
#include "serve/log.h"

namespace imgcheck::serve::fleet {

namespace {

using Clock = std::chrono::steady_clock;

// Thrown by the pace once the crawler stops: the crawl ends at its next request.
struct Stopping {};

// The repository `name` as the registry listed it, when it is one a reference may name on
// `host` (hostile text goes into URL paths only once it matches the distribution grammar).
std::optional<std::string> RepositoryName(const std::string& host, const std::string& name) {
  auto ref = image::ParseReference(host + "/" + name + ":x");
  if (!ref || ref->tag != "x" || !ref->digest.empty()) return std::nullopt;
  if (ref->path != name && ref->path != "library/" + name) return std::nullopt;
  return ref->path;
}

bool IsTag(const std::string& host, const std::string& repository, const std::string& tag) {
  auto ref = image::ParseReference(host + "/" + repository + ":" + tag);
  return ref && ref->tag == tag && ref->digest.empty() && ref->path == repository;
}

}  // namespace

util::Expected<CrawlTarget> ParseCrawlTarget(const std::string& flag) {
  CrawlTarget t;
  size_t slash = flag.find('/');
  t.host = flag.substr(0, slash);
  if (slash != std::string::npos) t.repository = flag.substr(slash + 1);
  auto ref = image::ParseReference(flag + (t.repository.empty() ? "/x" : "") + ":x");
  // The first component must be the registry (a '.' or ':', or localhost), not a Docker Hub path.
  if (!ref || ref->domain != t.host || ref->tag != "x" || !ref->digest.empty())
    return util::MakeError("--crawl '" + flag +
                           "': not HOST[:PORT] or HOST[:PORT]/REPOSITORY (a registry, then "
                           "optionally one repository)");
  if (!t.repository.empty()) t.repository = ref->path;
  return t;
}

Crawler::Crawler(CrawlOptions options, Verdicts& verdicts, Metrics& metrics, ManifestResolver fetch)
    : options_(std::move(options)),
      verdicts_(verdicts),
      metrics_(metrics),
      fetch_(std::move(fetch)),
      pacer_(options_.rate) {
  options_.load.registry.pace = [this] { Pace(crawling_); };
  options_.load.registry.read_timeout_s = options_.load.limits.read_timeout_s;
  options_.load.registry.min_rate = options_.load.limits.min_rate;
  options_.load.registry.deadline_s = options_.load.limits.deadline_s;
  if (options_.targets.empty()) return;
  thread_ = std::thread([this] {
    for (;;) {
      auto start = Clock::now();
      for (const CrawlTarget& t : options_.targets) {
        {
          std::lock_guard lock(mu_);
          if (stopping_) return;
        }
        Crawl(t);
      }
      std::unique_lock lock(mu_);
      if (wake_.wait_until(lock, start + options_.interval, [this] { return stopping_; })) return;
    }
  });
}

Crawler::~Crawler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Crawler::Pace(const std::string& host) {
  Pacer::Clock::time_point slot = pacer_.Reserve(host);
  std::unique_lock lock(mu_);
  if (wake_.wait_until(lock, slot, [this] { return stopping_; })) throw Stopping{};
}

void Crawler::Offer(const CrawlTarget& target, const std::string& repository,
                    const std::string& digest, CrawlResult& result) {
  ++result.digests;
  bool queued = false;
  if (!verdicts_.Lookup(digest)) {  // not judged under the current policy
    queued = verdicts_.Sweep(digest, "docker://" + target.host + "/" + repository + "@" + digest);
    if (!queued) {
      ++result.errors;
      metrics_.CrawlError(target.host);
      if (result.first_error.empty()) result.first_error = "the work queue is full";
    }
  }
  result.queued += queued ? 1 : 0;
  metrics_.CrawlDigest(target.host, queued);
}

CrawlResult Crawler::Crawl(const CrawlTarget& target) {
  CrawlResult r;
  const std::string& host = target.host;
  crawling_ = host;  // what the pace hook (which is not told) paces
  auto start = Clock::now();
  auto error = [&](const std::string& what) {
    ++r.errors;
    metrics_.CrawlError(host);
    if (r.first_error.empty()) r.first_error = what;
  };
  // Walks a listing page by page: `get(next)` fetches one; false once `take` wants no more.
  // A page seen before (a loop) ends it, as does the bound on pages a listing may take.
  auto walk = [&](const auto& get, const auto& take) {
    std::set<std::string> seen;
    std::string next;
    for (;;) {
      image::ListingPage page = get(next);
      ++r.pages;
      metrics_.CrawlPage(host);
      for (const std::string& name : page.names)
        if (!take(name)) return;
      if (page.next.empty()) return;
      if (!seen.insert(page.next).second) {
        error("a page loop in " + host + "'s listing, at " + page.next.substr(0, 200));
        return;
      }
      next = std::move(page.next);
    }
  };
  std::set<std::string> digests;  // distinct, this crawl
  try {
    std::vector<std::string> repositories;
    if (!target.repository.empty()) {
      repositories.push_back(target.repository);
    } else {
      try {
        image::Catalog catalog(host, options_.load.registry);
        walk(
            [&](const std::string& next) { return catalog.Repositories(next, options_.page_size); },
            [&](const std::string& name) {
              if (repositories.size() >= options_.max_repositories) return false;
              if (auto repo = RepositoryName(host, name)) {
                repositories.push_back(*repo);
              } else {
                error("the catalog lists '" + name.substr(0, 100) + "', not a repository name");
              }
              return true;
            });
      } catch (const util::Fatal& e) {
        error(e.what());
      }
    }
    r.repositories = repositories.size();
    for (const std::string& repo : repositories) {
      if (r.tags >= options_.max_tags) break;
      try {
        image::Repository repository(host + "/" + repo, options_.load.registry);
        std::vector<std::string> tags;
        walk([&](const std::string& next) { return repository.Tags(next, options_.page_size); },
             [&](const std::string& tag) {
               if (r.tags + tags.size() >= options_.max_tags) return false;
               if (IsTag(host, repo, tag)) {
                 tags.push_back(tag);
               } else {
                 error(repo + " lists '" + tag.substr(0, 100) + "', not a tag");
               }
               return true;
             });
        for (const std::string& tag : tags) {
          ++r.tags;
          try {
            image::KnownManifest m =
                fetch_("docker://" + host + "/" + repo + ":" + tag, options_.load);
            if (digests.insert(m.digest).second) Offer(target, repo, m.digest, r);
          } catch (const util::Fatal& e) {
            error(e.what());
          }
        }
      } catch (const util::Fatal& e) {
        error(e.what());
      }
    }
  } catch (const Stopping&) {
    Log("crawl " + host + ": stopped, the server is shutting down");
    return r;
  } catch (const std::exception& e) {  // never the server's end: the next crawl tries again
    error(e.what());
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", seconds);
  std::string line = "crawl " + host + (target.repository.empty() ? "" : "/" + target.repository) +
                     ": " + std::to_string(r.repositories) + " repositories, " +
                     std::to_string(r.tags) + " tags, " + std::to_string(r.digests) + " digests, " +
                     std::to_string(r.queued) + " queued in " + took + " s";
  if (r.errors > 0)
    line += "; " + std::to_string(r.errors) + " errors, the first: " + r.first_error;
  Log(line);
  return r;
}

}  // namespace imgcheck::serve::fleet

// A bounded registry crawl (serve --crawl, issue 33): the catalog (or one repository), its tags,
// each tag's image manifest digest, and a sweep queued for each digest the current policy has
// not judged, so that images nobody has asked about yet are judged before a pod names them.
// The registry is hostile: a crawl is bounded in repositories, tags and page size, follows
// pages only on the registry's own origin, stops at a page loop, and paces its requests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "image/image.h"
#include "serve/fleet/pacer.h"
#include "serve/fleet/resolver.h"
#include "serve/fleet/verdicts.h"
#include "serve/metrics.h"
#include "util/error.h"

namespace imgcheck::serve::fleet {

struct CrawlTarget {
  std::string host;        ///< the registry, HOST[:PORT]
  std::string repository;  ///< one repository; empty: the whole catalog
};

/// `--crawl HOST[/REPO]`; an error when it names no registry or a malformed repository.
util::Expected<CrawlTarget> ParseCrawlTarget(const std::string& flag);

struct CrawlOptions {
  std::vector<CrawlTarget> targets;
  std::chrono::seconds interval{3600};  ///< --crawl-interval: from one crawl's start to the next
  double rate = 10;                     ///< --crawl-rate: requests a second to one registry
  size_t page_size = 100;               ///< --crawl-page-size: `n` of each listing page
  /// Bounds of one crawl of one registry: repositories listed, tags resolved. A catalog of
  /// millions is walked this far only, each crawl; the digests past it wait for a pod to name them.
  size_t max_repositories = 1000;
  size_t max_tags = 10000;
  image::LoadOptions load;  ///< registry options (credentials, TLS, limits) and platform
};

/// What one crawl of one target found.
struct CrawlResult {
  size_t pages = 0, repositories = 0, tags = 0, digests = 0, queued = 0, errors = 0;
  std::string first_error;  ///< one line; empty when none
};

class Crawler {
 public:
  /// Crawls every target at once and then every options.interval, on a thread of its own, until
  /// destroyed. `fetch` resolves a tag to the platform's image manifest, as Resolver does.
  Crawler(CrawlOptions options, Verdicts& verdicts, Metrics& metrics,
          ManifestResolver fetch = image::ResolveRegistryManifest);
  /// Stops: the crawl under way ends before its next request (one in flight runs to its
  /// --read-timeout at most).
  ~Crawler();
  Crawler(const Crawler&) = delete;
  Crawler& operator=(const Crawler&) = delete;

  /// One crawl of `target`, now, on the calling thread; logs its one line.
  CrawlResult Crawl(const CrawlTarget& target);

 private:
  /// Waits for registry `host`'s turn (options.rate); throws once stopping.
  void Pace(const std::string& host);
  /// Queues `digest` of `repository` unless the current policy judged it.
  void Offer(const CrawlTarget& target, const std::string& repository, const std::string& digest,
             CrawlResult& result);

  CrawlOptions options_;
  Verdicts& verdicts_;
  Metrics& metrics_;
  ManifestResolver fetch_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  ///< under mu_
  Pacer pacer_;
  std::string crawling_;  ///< the registry being crawled (one crawl at a time)
  std::thread thread_;
};

}  // namespace imgcheck::serve::fleet

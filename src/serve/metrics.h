// What `serve` counts, rendered as Prometheus text exposition format 0.0.4.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>

namespace imgcheck::serve {

class Metrics {
 public:
  /// One request answered on `path` with HTTP status `code`.
  void Request(const std::string& path, int code);
  /// A verdict found in the process's own cache or in the shared store ("memory", "redis").
  void CacheHit(const std::string& tier);
  void CacheMiss();
  /// A verdict in the shared store that failed its seal check, by reason ("unsigned",
  /// "other_key", "bad_mac"); returns how many of that reason so far.
  uint64_t VerdictRejected(const std::string& reason);
  void ScanStarted() { ++scans_in_flight_; }
  /// A scan that ended after `seconds`; `ok` false when it failed.
  void ScanFinished(double seconds, bool ok);
  /// An admission decision: "allow", "deny", "unknown", "error".
  void Decision(const std::string& outcome);
  /// Something the HTTP layer did to a connection or request: "refused_total", "timeout"...
  void HttpEvent(std::string_view event);
  /// Whether the shared store (Redis) answered the last check; without it the server is
  /// degraded (verdicts from memory only), not unready.
  void SharedStoreUp(bool up) { shared_store_up_ = up; }
  int64_t scans_in_flight() const { return scans_in_flight_; }

  // The fleet (issue 33): the work queue, facts, registries.
  /// An entry of the shared work queue delivered to this replica, by priority ("now", "sweep").
  void WorkDelivered(std::string_view priority);
  /// One taken over from a replica that left it idle past the lease without a word (it died or
  /// hangs): the dead-replica signal. Retries of a failed or refused entry are not counted.
  void WorkReclaimed(std::string_view priority);
  /// One this replica handed back for another to take at once (a sweep for a policy it does
  /// not run, given back on a reload or when first met): no lease waited, no delivery counted.
  void WorkHandedBack(std::string_view priority);
  /// What this replica judged while Redis did not answer, by `what` ("verdict", "known"):
  /// written to Redis once it answers again, or dropped past the bound (the oldest first).
  void DegradedReplayed(std::string_view what, uint64_t n);
  void DegradedDropped(std::string_view what, uint64_t n);
  /// One moved to the dead letters after too many deliveries.
  void WorkDeadLettered(std::string_view priority);
  /// One that was no digest and reference (dropped); returns how many so far.
  uint64_t WorkInvalid();
  /// Work put back because registry `host` had its share of the workers (--registry-share).
  void WorkDeferred(std::string_view host);
  /// A scan of an image on registry `host` starts (+1) or ends (-1).
  void RegistryScans(std::string_view host, int delta);
  /// What waits at `priority` (entries, age of the oldest in seconds), as last measured (off the
  /// I/O thread: it asks Redis).
  void WorkDepth(std::string_view priority, size_t entries, double oldest_seconds);
  /// A facts store lookup ("hit": `bytes` read, "miss").
  void Facts(std::string_view result, uint64_t bytes);
  /// A facts entry refused: its seal ("unsigned", "other_key", "bad_mac") or its contents
  /// ("invalid").
  void FactsRejected(std::string_view reason);
  /// An entry of `bytes` stored, `evicted` older ones evicted to keep the bound.
  void FactsStored(uint64_t bytes, int64_t evicted);
  /// A scan judged from stored facts alone: no blob read from the registry.
  void JudgedWithoutPull();
  /// serve --crawl of registry `host`: a listing page fetched; a distinct digest found, `queued`
  /// when it had no verdict under the current policy and was queued as a sweep; an error (a
  /// request, a page, a name or a tag refused: logged with the crawl's line).
  void CrawlPage(std::string_view host);
  void CrawlDigest(std::string_view host, bool queued);
  void CrawlError(std::string_view host);

  std::string Render() const;

  // serve --trust-key (h-attest): verdicts taken from signed attestations, and attestations
  // refused, by reason (attest::RejectionName: "bad-signature", "other-key", ...).
  void AttestationVerdict(const std::string& verdict);
  void AttestationRejected(std::string_view reason);

 private:
  /// Upper bounds of the scan seconds histogram: a warm cached scan is well under a second, a
  /// cold framework image can take minutes.
  static constexpr std::array<double, 10> kBuckets = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> hits_, decisions_, rejected_;
  uint64_t misses_ = 0;
  std::map<bool, uint64_t> scans_;
  std::array<uint64_t, kBuckets.size()> bucket_counts_{};
  uint64_t scan_count_ = 0;
  double scan_sum_ = 0;
  std::atomic<int64_t> scans_in_flight_{0};
  std::map<std::string, uint64_t, std::less<>> http_events_;
  std::atomic<int> shared_store_up_{-1};  ///< -1: no store
  // h-attest: attestation verdicts by verdict, refusals by reason (under mu_).
  std::map<std::string, uint64_t> attestation_verdicts_;
  std::map<std::string, uint64_t, std::less<>> attestation_rejected_;
  void RenderAttestations(std::ostream& o) const;

  // The fleet (issue 33).
  std::map<std::string, uint64_t, std::less<>> work_delivered_, work_reclaimed_, work_dead_,
      work_handed_back_;
  std::map<std::string, uint64_t, std::less<>> degraded_replayed_, degraded_dropped_;
  uint64_t work_invalid_ = 0;
  std::map<std::string, std::pair<size_t, double>, std::less<>> work_depth_;
  std::map<std::string, int64_t, std::less<>> registry_scans_;
  std::map<std::string, uint64_t, std::less<>> work_deferred_;
  std::map<std::string, uint64_t, std::less<>> facts_lookups_, facts_rejected_;
  uint64_t facts_read_bytes_ = 0, facts_stored_bytes_ = 0, facts_evicted_ = 0;
  uint64_t judged_without_pull_ = 0;
  void RenderFacts(std::ostream& o) const;
  // serve --crawl, by registry (under mu_).
  std::map<std::string, uint64_t, std::less<>> crawl_pages_, crawl_digests_, crawl_queued_,
      crawl_errors_;
  void RenderCrawl(std::ostream& o) const;
};

}  // namespace imgcheck::serve

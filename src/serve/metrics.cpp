#include "serve/metrics.h"

#include <algorithm>
#include <sstream>

namespace imgcheck::serve {

void Metrics::Request(const std::string& path, int code) {
  std::lock_guard lock(mu_);
  ++requests_[{path, code}];
}

void Metrics::CacheHit(const std::string& tier) {
  std::lock_guard lock(mu_);
  ++hits_[tier];
}

void Metrics::CacheMiss() {
  std::lock_guard lock(mu_);
  ++misses_;
}

uint64_t Metrics::VerdictRejected(const std::string& reason) {
  std::lock_guard lock(mu_);
  return ++rejected_[reason];
}

void Metrics::Decision(const std::string& outcome) {
  std::lock_guard lock(mu_);
  ++decisions_[outcome];
}

void Metrics::HttpEvent(std::string_view event) {
  std::lock_guard lock(mu_);
  auto it = http_events_.find(event);
  if (it == http_events_.end()) it = http_events_.emplace(std::string(event), 0).first;
  ++it->second;
}

void Metrics::ScanFinished(double seconds, bool ok) {
  --scans_in_flight_;
  std::lock_guard lock(mu_);
  ++scans_[ok];
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++bucket_counts_[i];
  ++scan_count_;
  scan_sum_ += seconds;
}

namespace {

void Bump(std::map<std::string, uint64_t, std::less<>>& counts, std::string_view key,
          uint64_t n = 1) {
  auto it = counts.find(key);
  if (it == counts.end()) it = counts.emplace(std::string(key), 0).first;
  it->second += n;
}

}  // namespace

void Metrics::WorkDelivered(std::string_view priority) {
  std::lock_guard lock(mu_);
  Bump(work_delivered_, priority);
}

void Metrics::WorkReclaimed(std::string_view priority) {
  std::lock_guard lock(mu_);
  Bump(work_reclaimed_, priority);
}

void Metrics::WorkHandedBack(std::string_view priority) {
  std::lock_guard lock(mu_);
  Bump(work_handed_back_, priority);
}

void Metrics::DegradedReplayed(std::string_view what, uint64_t n) {
  std::lock_guard lock(mu_);
  Bump(degraded_replayed_, what, n);
}

void Metrics::DegradedDropped(std::string_view what, uint64_t n) {
  std::lock_guard lock(mu_);
  Bump(degraded_dropped_, what, n);
}

void Metrics::WorkDeadLettered(std::string_view priority) {
  std::lock_guard lock(mu_);
  Bump(work_dead_, priority);
}

uint64_t Metrics::WorkInvalid() {
  std::lock_guard lock(mu_);
  return ++work_invalid_;
}

void Metrics::RegistryScans(std::string_view host, int delta) {
  // A label value from a reference: registry host characters only (anything else is "other").
  bool plain = !host.empty() && host.size() <= 255 &&
               host.find_first_not_of(
                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789.-:[]") == std::string_view::npos;
  std::string_view label = plain ? host : "other";
  std::lock_guard lock(mu_);
  auto it = registry_scans_.find(label);
  if (it == registry_scans_.end()) it = registry_scans_.emplace(std::string(label), 0).first;
  it->second += delta;
}

void Metrics::WorkDepth(std::string_view priority, size_t entries, double oldest_seconds) {
  std::lock_guard lock(mu_);
  auto it = work_depth_.find(priority);
  if (it == work_depth_.end())
    it = work_depth_.emplace(std::string(priority), std::pair<size_t, double>{}).first;
  it->second = {entries, oldest_seconds};
}

std::string Metrics::Render() const {
  std::ostringstream o;
  std::lock_guard lock(mu_);
  o << "# HELP imgcheck_requests_total HTTP requests answered, by path and status code.\n"
       "# TYPE imgcheck_requests_total counter\n";
  for (const auto& [k, n] : requests_)
    o << "imgcheck_requests_total{path=\"" << k.first << "\",code=\"" << k.second << "\"} " << n
      << "\n";
  o << "# HELP imgcheck_verdict_cache_hits_total Verdicts found without scanning, by tier.\n"
       "# TYPE imgcheck_verdict_cache_hits_total counter\n";
  for (const char* tier : {"memory", "redis"}) {
    auto it = hits_.find(tier);
    o << "imgcheck_verdict_cache_hits_total{tier=\"" << tier << "\"} "
      << (it == hits_.end() ? 0 : it->second) << "\n";
  }
  o << "# HELP imgcheck_verdict_cache_misses_total Verdict lookups that found none.\n"
       "# TYPE imgcheck_verdict_cache_misses_total counter\n"
       "imgcheck_verdict_cache_misses_total "
    << misses_ << "\n";
  o << "# HELP imgcheck_verdicts_rejected_total Verdicts in the shared store ignored because "
       "their seal (--verdict-key-file) did not check, by reason.\n"
       "# TYPE imgcheck_verdicts_rejected_total counter\n";
  for (const char* reason : {"unsigned", "other_key", "bad_mac"}) {
    auto it = rejected_.find(reason);
    o << "imgcheck_verdicts_rejected_total{reason=\"" << reason << "\"} "
      << (it == rejected_.end() ? 0 : it->second) << "\n";
  }
  o << "# HELP imgcheck_admission_decisions_total Admission answers per image, by outcome.\n"
       "# TYPE imgcheck_admission_decisions_total counter\n";
  for (const auto& [k, n] : decisions_)
    o << "imgcheck_admission_decisions_total{outcome=\"" << k << "\"} " << n << "\n";
  o << "# HELP imgcheck_scans_in_flight Scans running now in this process.\n"
       "# TYPE imgcheck_scans_in_flight gauge\n"
       "imgcheck_scans_in_flight "
    << scans_in_flight_ << "\n";
  o << "# HELP imgcheck_scans_total Scans finished, by result.\n"
       "# TYPE imgcheck_scans_total counter\n";
  for (bool ok : {true, false}) {
    auto it = scans_.find(ok);
    o << "imgcheck_scans_total{result=\"" << (ok ? "ok" : "failed") << "\"} "
      << (it == scans_.end() ? 0 : it->second) << "\n";
  }
  o << "# HELP imgcheck_scan_seconds Wall time of each scan.\n"
       "# TYPE imgcheck_scan_seconds histogram\n";
  for (size_t i = 0; i < kBuckets.size(); ++i)
    o << "imgcheck_scan_seconds_bucket{le=\"" << kBuckets[i] << "\"} " << bucket_counts_[i] << "\n";
  o << "imgcheck_scan_seconds_bucket{le=\"+Inf\"} " << scan_count_ << "\n"
    << "imgcheck_scan_seconds_sum " << scan_sum_ << "\n"
    << "imgcheck_scan_seconds_count " << scan_count_ << "\n";
  o << "# HELP imgcheck_http_events_total Connections refused or cut, requests refused, by why.\n"
       "# TYPE imgcheck_http_events_total counter\n";
  for (const auto& [k, n] : http_events_)
    o << "imgcheck_http_events_total{event=\"" << k << "\"} " << n << "\n";
  RenderAttestations(o);
  if (int up = shared_store_up_; up >= 0)
    o << "# HELP imgcheck_shared_store_up Whether Redis answered the last check (0: degraded, "
         "verdicts from memory only).\n"
         "# TYPE imgcheck_shared_store_up gauge\n"
         "imgcheck_shared_store_up "
      << up << "\n";
  // The fleet (issue 33).
  auto by_priority = [&](const char* name, const char* help,
                         const std::map<std::string, uint64_t, std::less<>>& counts) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n";
    for (const char* p : {"now", "sweep"}) {
      auto it = counts.find(p);
      o << name << "{priority=\"" << p << "\"} " << (it == counts.end() ? 0 : it->second) << "\n";
    }
  };
  by_priority("imgcheck_work_deliveries_total",
              "Entries of the shared work queue delivered to this replica.", work_delivered_);
  by_priority("imgcheck_work_reclaimed_total",
              "Entries taken over from a replica that left them idle past the lease without a "
              "word (it died or hangs; retries of failed or refused entries not counted).",
              work_reclaimed_);
  by_priority("imgcheck_work_handed_back_total",
              "Entries this replica handed back for another to take at once (sweeps for a "
              "policy it does not run, on a reload or when first met).",
              work_handed_back_);
  by_priority("imgcheck_work_dead_letters_total",
              "Entries moved to imgcheck:work:dead after too many deliveries.", work_dead_);
  auto by_what = [&](const char* name, const char* help,
                     const std::map<std::string, uint64_t, std::less<>>& counts) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n";
    for (const char* w : {"verdict", "known"}) {
      auto it = counts.find(w);
      o << name << "{what=\"" << w << "\"} " << (it == counts.end() ? 0 : it->second) << "\n";
    }
  };
  by_what("imgcheck_degraded_replayed_total",
          "Verdicts and known digests judged while Redis did not answer, written to it since.",
          degraded_replayed_);
  by_what("imgcheck_degraded_dropped_total",
          "Verdicts and known digests judged while Redis did not answer, dropped past the bound "
          "(the oldest first) before it answered again.",
          degraded_dropped_);
  o << "# HELP imgcheck_work_invalid_total Entries of the work queue in Redis that were no "
       "digest and reference, dropped.\n"
       "# TYPE imgcheck_work_invalid_total counter\n"
       "imgcheck_work_invalid_total "
    << work_invalid_ << "\n";
  o << "# HELP imgcheck_registry_scans_in_flight Scans running now in this process, by "
       "registry.\n# TYPE imgcheck_registry_scans_in_flight gauge\n";
  for (const auto& [host, n] : registry_scans_)
    o << "imgcheck_registry_scans_in_flight{registry=\"" << host << "\"} " << n << "\n";
  o << "# HELP imgcheck_work_queue_depth Entries waiting or running, by priority (the shared "
       "queue's with --redis).\n# TYPE imgcheck_work_queue_depth gauge\n";
  for (const auto& [p, d] : work_depth_)
    o << "imgcheck_work_queue_depth{priority=\"" << p << "\"} " << d.first << "\n";
  o << "# HELP imgcheck_work_queue_oldest_seconds Age of the oldest entry, by priority.\n"
       "# TYPE imgcheck_work_queue_oldest_seconds gauge\n";
  for (const auto& [p, d] : work_depth_)
    o << "imgcheck_work_queue_oldest_seconds{priority=\"" << p << "\"} " << d.second << "\n";
  o << "# HELP imgcheck_work_deferred_total Work put back because its registry had its share "
       "of the workers (--registry-share), by registry.\n"
       "# TYPE imgcheck_work_deferred_total counter\n";
  for (const auto& [host, n] : work_deferred_)
    o << "imgcheck_work_deferred_total{registry=\"" << host << "\"} " << n << "\n";
  RenderFacts(o);
  RenderCrawl(o);
  return o.str();
}

void Metrics::WorkDeferred(std::string_view host) {
  std::lock_guard lock(mu_);
  auto it = work_deferred_.find(host);
  if (it == work_deferred_.end()) it = work_deferred_.emplace(host, 0).first;
  ++it->second;
}

void Metrics::Facts(std::string_view result, uint64_t bytes) {
  std::lock_guard lock(mu_);
  auto it = facts_lookups_.find(result);
  if (it == facts_lookups_.end()) it = facts_lookups_.emplace(result, 0).first;
  ++it->second;
  facts_read_bytes_ += bytes;
}

void Metrics::FactsRejected(std::string_view reason) {
  std::lock_guard lock(mu_);
  auto it = facts_rejected_.find(reason);
  if (it == facts_rejected_.end()) it = facts_rejected_.emplace(reason, 0).first;
  ++it->second;
}

void Metrics::FactsStored(uint64_t bytes, int64_t evicted) {
  std::lock_guard lock(mu_);
  facts_stored_bytes_ += bytes;
  facts_evicted_ += static_cast<uint64_t>(std::max<int64_t>(0, evicted));
}

void Metrics::JudgedWithoutPull() {
  std::lock_guard lock(mu_);
  ++judged_without_pull_;
}

void Metrics::RenderFacts(std::ostream& o) const {
  o << "# HELP imgcheck_facts_lookups_total Facts store lookups (layer readings, configs), by "
       "result.\n# TYPE imgcheck_facts_lookups_total counter\n";
  for (const char* r : {"hit", "miss"}) {
    auto it = facts_lookups_.find(r);
    o << "imgcheck_facts_lookups_total{result=\"" << r << "\"} "
      << (it == facts_lookups_.end() ? 0 : it->second) << "\n";
  }
  o << "# HELP imgcheck_facts_rejected_total Facts entries ignored (read from the registry "
       "instead), by reason.\n# TYPE imgcheck_facts_rejected_total counter\n";
  for (const char* r : {"unsigned", "other_key", "bad_mac", "invalid"}) {
    auto it = facts_rejected_.find(r);
    o << "imgcheck_facts_rejected_total{reason=\"" << r << "\"} "
      << (it == facts_rejected_.end() ? 0 : it->second) << "\n";
  }
  o << "# HELP imgcheck_facts_read_bytes_total Bytes of facts read from the store.\n"
       "# TYPE imgcheck_facts_read_bytes_total counter\nimgcheck_facts_read_bytes_total "
    << facts_read_bytes_ << "\n";
  o << "# HELP imgcheck_facts_stored_bytes_total Bytes of facts written to the store.\n"
       "# TYPE imgcheck_facts_stored_bytes_total counter\nimgcheck_facts_stored_bytes_total "
    << facts_stored_bytes_ << "\n";
  o << "# HELP imgcheck_facts_evicted_total Facts entries evicted to keep --facts-max-bytes.\n"
       "# TYPE imgcheck_facts_evicted_total counter\nimgcheck_facts_evicted_total "
    << facts_evicted_ << "\n";
  o << "# HELP imgcheck_judged_without_pull_total Scans judged from stored facts with no blob "
       "read from the registry (re-judgements after a rules change).\n"
       "# TYPE imgcheck_judged_without_pull_total counter\nimgcheck_judged_without_pull_total "
    << judged_without_pull_ << "\n";
}

void Metrics::CrawlPage(std::string_view host) {
  std::lock_guard lock(mu_);
  Bump(crawl_pages_, host);
}

void Metrics::CrawlDigest(std::string_view host, bool queued) {
  std::lock_guard lock(mu_);
  Bump(crawl_digests_, host);
  if (queued) Bump(crawl_queued_, host);
}

void Metrics::CrawlError(std::string_view host) {
  std::lock_guard lock(mu_);
  Bump(crawl_errors_, host);
}

void Metrics::RenderCrawl(std::ostream& o) const {
  const std::pair<const char*, const std::map<std::string, uint64_t, std::less<>>*> series[] = {
      {"pages_total Listing pages (catalog, tags) fetched", &crawl_pages_},
      {"digests_total Distinct image digests found", &crawl_digests_},
      {"queued_total Digests found without a verdict of the current policy, queued as sweeps",
       &crawl_queued_},
      {"errors_total Requests, pages, names or tags that failed or were refused", &crawl_errors_}};
  for (const auto& [text, counts] : series) {
    std::string_view t = text;
    std::string name = "imgcheck_crawl_" + std::string(t.substr(0, t.find(' ')));
    o << "# HELP " << name << " serve --crawl: " << t.substr(t.find(' ') + 1)
      << ", by registry.\n# TYPE " << name << " counter\n";
    for (const auto& [host, n] : *counts)
      o << name << "{registry=\"" << host << "\"} " << n << "\n";
  }
}

// serve --trust-key (h-attest).
void Metrics::AttestationVerdict(const std::string& verdict) {
  std::lock_guard lock(mu_);
  ++attestation_verdicts_[verdict];
}

void Metrics::AttestationRejected(std::string_view reason) {
  std::lock_guard lock(mu_);
  auto it = attestation_rejected_.find(reason);
  if (it == attestation_rejected_.end()) it = attestation_rejected_.emplace(reason, 0).first;
  ++it->second;
}

void Metrics::RenderAttestations(std::ostream& o) const {
  o << "# HELP imgcheck_attestation_verdicts_total Verdicts taken from a signed attestation "
       "(--trust-key) instead of a scan, by verdict.\n"
       "# TYPE imgcheck_attestation_verdicts_total counter\n";
  for (const char* v : {"pass", "fail"}) {
    auto it = attestation_verdicts_.find(v);
    o << "imgcheck_attestation_verdicts_total{verdict=\"" << v << "\"} "
      << (it == attestation_verdicts_.end() ? 0 : it->second) << "\n";
  }
  o << "# HELP imgcheck_attestations_rejected_total Attestations refused, by reason.\n"
       "# TYPE imgcheck_attestations_rejected_total counter\n";
  for (const auto& [k, n] : attestation_rejected_)
    o << "imgcheck_attestations_rejected_total{reason=\"" << k << "\"} " << n << "\n";
}

}  // namespace imgcheck::serve

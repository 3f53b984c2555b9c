#include "image/read_layers.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "image/progress.h"
#include "util/error.h"
#include "util/profile.h"

namespace imgcheck::image {

namespace {

constexpr size_t kNoFailure = std::numeric_limits<size_t>::max();

// Counts a blob's bytes for the progress line and stops a reading nobody will merge.
class TrackedReader : public BlobReader {
 public:
  TrackedReader(std::unique_ptr<BlobReader> in, Progress& progress, std::function<bool()> cancelled)
      : in_(std::move(in)), progress_(progress), cancelled_(std::move(cancelled)) {}
  size_t Read(char* buf, size_t n) override {
    if (cancelled_()) throw util::Fatal("stopped: a lower layer failed");
    util::ProfileSpan span(util::Stage::kBlobRead);
    size_t got = in_->Read(buf, n);
    progress_.Advance(got);
    return got;
  }

 private:
  std::unique_ptr<BlobReader> in_;
  Progress& progress_;
  std::function<bool()> cancelled_;
};

// The shared state of one ReadLayers call.
class Pipeline {
 public:
  Pipeline(const std::vector<LayerJob>& jobs, const ReadLayersOptions& options,
           const std::function<LayerContents(const LayerJob&, const TrackBlob&)>& read)
      : jobs_(jobs),
        options_(options),
        read_(read),
        progress_(Progress::ShouldShow(options.progress), 2, static_cast<int>(jobs.size()),
                  TotalSize(jobs)),
        slots_(jobs.size()) {
    // Biggest first: the longest reading must not be the last to start (with 2 threads and
    // layers of 0.4, 0.4 and 0.9 GB, in-order scheduling would read 0.4 + 0.9 on one thread).
    for (size_t i = 0; i < jobs.size(); ++i) order_.push_back(i);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](size_t a, size_t b) { return jobs[a].stored_size > jobs[b].stored_size; });
  }

  // One layer's reading: from the cache, or read (and then stored). Thread-safe. `again`: a
  // reading with this plan, not the cached one.
  LayerContents Produce(size_t i, const DigestPlan* again = nullptr) {
    LayerJob job = jobs_[i];
    job.digests = again ? *again : Plan();
    bool cacheable = options_.cache != nullptr && !job.key.diff_id.empty();
    if (cacheable && again == nullptr) {
      std::optional<LayerContents> hit;
      {
        util::ProfileSpan span(util::Stage::kCache);
        hit = options_.cache->Lookup(job.key, job.index);
      }
      if (hit) {
        if (options_.check_cached) options_.check_cached(job, *hit);
        progress_.FinishLayer(job.index, job.stored_size);
        return std::move(*hit);
      }
    }
    progress_.StartLayer(job.index);
    TrackBlob track = [this, i](std::unique_ptr<BlobReader> in) -> std::unique_ptr<BlobReader> {
      return std::make_unique<TrackedReader>(std::move(in), progress_,
                                             [this, i] { return Cancelled(i); });
    };
    LayerContents contents;
    {
      util::ProfileSpan span(util::Stage::kRead);
      contents = read_(job, track);
    }
    progress_.FinishLayer(job.index);
    if (cacheable) {
      // A reading that missed a digest wanted here is replaced by the one read again, whose
      // digests serve any later scan that wants these or fewer.
      util::ProfileSpan span(util::Stage::kCache);
      options_.cache->Store(job.key, contents, job.index);
      stored_.store(true, std::memory_order_relaxed);
    }
    return contents;
  }

  void Worker() {
    while (true) {
      size_t i;
      {
        std::lock_guard lock(mu_);
        // Layers above a failure are not started: nobody will merge them.
        while (next_ < order_.size() && order_[next_] > first_failure_) ++next_;
        if (aborted_ || next_ >= order_.size()) return;
        i = order_[next_++];
      }
      Slot result;
      try {
        result.contents = Produce(i);
      } catch (...) {
        result.error = std::current_exception();
      }
      std::lock_guard lock(mu_);
      if (result.error) first_failure_ = std::min(first_failure_, i);
      slots_[i] = std::move(result);
      slots_[i].ready = true;
      cv_.notify_all();
    }
  }

  // Waits for layer i's reading; rethrows its failure.
  LayerContents Take(size_t i) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return slots_[i].ready; });
    Slot slot = std::move(slots_[i]);
    slots_[i] = Slot{};
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(slot.contents);
  }

  // Merges layer i's reading, read again first when its plan missed a digest now wanted; then
  // learns what it states. On the calling thread, in order.
  void Merge(size_t i, LayerContents contents,
             const std::function<void(const LayerJob&, LayerContents&)>& merge) {
    if (options_.stated) {
      DigestPlan plan = Plan();
      if (!Covers(contents, plan)) {
        if (options_.dropped) options_.dropped(contents);
        contents = Produce(i, &plan);
      }
    }
    merge(jobs_[i], contents);
    if (!options_.stated) return;
    std::vector<std::string> stated = options_.stated(jobs_[i], contents);
    std::lock_guard lock(mu_);
    if (!stated.empty()) {
      auto more = std::make_shared<PathSet>(stated_ ? *stated_ : PathSet{});
      more->insert(std::make_move_iterator(stated.begin()), std::make_move_iterator(stated.end()));
      stated_ = std::move(more);
    }
  }

  void Abort() {
    std::lock_guard lock(mu_);
    aborted_ = true;
    first_failure_ = 0;
    cv_.notify_all();
  }

  size_t Width() const { return static_cast<size_t>(std::max(1, options_.jobs)); }
  bool stored() const { return stored_.load(std::memory_order_relaxed); }
  Progress& progress() { return progress_; }

 private:
  struct Slot {
    bool ready = false;
    LayerContents contents;
    std::exception_ptr error;
  };

  static uint64_t TotalSize(const std::vector<LayerJob>& jobs) {
    uint64_t total = 0;
    for (const LayerJob& j : jobs) total += j.stored_size;
    return total;
  }

  // The paths stated by the layers merged so far.
  DigestPlan Plan() {
    std::lock_guard lock(mu_);
    return DigestPlan{stated_, nullptr};
  }

  // Whether every file of `c` that `plan` wants was read with its digest wanted.
  static bool Covers(const LayerContents& c, const DigestPlan& plan) {
    if (!plan.paths) return true;
    for (const LayerEntry& e : c.entries)
      if (e.kind == EntryKind::kFile && !e.digest_wanted && plan.Wants(e.path)) return false;
    return true;
  }

  // Only layers above the lowest failure are abandoned: those below still run to the end, so
  // the failure reported is always the lowest one, whatever the threads' timing.
  bool Cancelled(size_t i) {
    std::lock_guard lock(mu_);
    return aborted_ || i > first_failure_;
  }

  const std::vector<LayerJob>& jobs_;
  const ReadLayersOptions& options_;
  const std::function<LayerContents(const LayerJob&, const TrackBlob&)>& read_;
  Progress progress_;
  std::atomic<bool> stored_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  std::shared_ptr<const PathSet> stated_;  // what the merged layers state (DigestPlan::paths)
  std::vector<size_t> order_;              // the order in which workers start layers
  size_t next_ = 0;                        // position in order_ of the next layer to start
  size_t first_failure_ = kNoFailure;
  bool aborted_ = false;
};

// Joins the workers however the calling thread leaves.
class Workers {
 public:
  Workers(Pipeline& p, size_t n) : p_(p) {
    for (size_t i = 0; i < n; ++i) threads_.emplace_back([&p] { p.Worker(); });
  }
  ~Workers() {
    if (!finished_) p_.Abort();
    for (std::thread& t : threads_) t.join();
  }
  void Finished() { finished_ = true; }

 private:
  Pipeline& p_;
  std::vector<std::thread> threads_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<LayerCache> OpenLayerCache(const LoadOptions& options) {
  if (options.capture && options.capture_id.empty()) return nullptr;
  std::filesystem::path dir;
  if (options.use_cache)
    dir = options.cache_dir.empty() ? DefaultCacheDir() : std::filesystem::path(options.cache_dir);
  if (dir.empty() && !options.shared_layers) return nullptr;
  auto cache = std::make_unique<LayerCache>(dir, options.cache_max_bytes, options.shared_layers);
  if (!cache->enabled()) return nullptr;
  return cache;
}

ReadLayersOptions SpeedOptions(const LoadOptions& options, const LayerCache* cache) {
  ReadLayersOptions o;
  o.jobs = options.jobs;
  o.cache = cache;
  o.progress = options.progress;
  return o;
}

void ReadLayers(const std::vector<LayerJob>& jobs, const ReadLayersOptions& options,
                const std::function<LayerContents(const LayerJob&, const TrackBlob&)>& read,
                const std::function<void(const LayerJob&, LayerContents&)>& merge) {
  Pipeline p(jobs, options, read);
  size_t threads = std::min(p.Width(), jobs.size());
  if (threads <= 1) {
    for (size_t i = 0; i < jobs.size(); ++i) p.Merge(i, p.Produce(i), merge);
  } else {
    Workers workers(p, threads);
    for (size_t i = 0; i < jobs.size(); ++i) p.Merge(i, p.Take(i), merge);
    workers.Finished();
  }
  p.progress().Clear();
  if (p.stored()) options.cache->Prune();
}

}  // namespace imgcheck::image

// Reads an image's layers in parallel, through the layer cache, and hands them over in order.
// Reading a layer (decompressing, hashing, capturing) is independent per layer; merging is not,
// so layers are read on worker threads and merged on the calling thread, bottom first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "image/image.h"
#include "image/layer.h"
#include "image/layer_cache.h"
#include "image/source.h"

namespace imgcheck::image {

/// One layer to read.
struct LayerJob {
  int index = 0;             ///< the layer's index in the image (diagnostics carry it)
  LayerKey key;              ///< its cache key; an empty diff_id means "never cached"
  uint64_t stored_size = 0;  ///< the blob's size, for the progress line; 0 when unknown
  /// Set by ReadLayers for the `read` callback: the files whose MD5 this reading is to take.
  DigestPlan digests;
};

struct ReadLayersOptions {
  int jobs = 1;                       ///< layers read at once; 1 reads on the calling thread
  const LayerCache* cache = nullptr;  ///< null: no cache
  bool progress = false;              ///< a progress line on stderr, when it is a terminal
  /// Called (on a worker thread) before a cached reading is used; throws util::Fatal to fail
  /// the layer. Null: none.
  std::function<void(const LayerJob&, const LayerContents&)> check_cached;
  /// Called on the calling thread after each `merge`: the paths the layer's records state,
  /// whose digest is wanted from the layers above (DigestRule::stated). Null: no digests.
  std::function<std::vector<std::string>(const LayerJob&, const LayerContents&)> stated;
  /// Called for a reading dropped to be read again (to give back its budget). Null: none.
  std::function<void(const LayerContents&)> dropped;
};

/// The layer cache `options` ask for: use_cache, in cache_dir (else DefaultCacheDir()), bounded
/// by cache_max_bytes, with shared_layers behind it. Null when neither the directory nor the
/// shared tier is there, or when there is a capture policy without a capture_id (its entries
/// could not be told apart from another policy's).
std::unique_ptr<LayerCache> OpenLayerCache(const LoadOptions& options);

/// The parallelism, cache and progress settings of `options`, with `cache` (may be null).
ReadLayersOptions SpeedOptions(const LoadOptions& options, const LayerCache* cache);

/// Wraps a layer's opened blob so that its bytes show in the progress line, and so that its
/// reading stops (util::Fatal) once a lower layer has failed and the result is not wanted.
using TrackBlob = std::function<std::unique_ptr<BlobReader>(std::unique_ptr<BlobReader>)>;

/// For each job: the cached reading when there is one, else `read(job, track)`, which opens the
/// blob through `track`, reads and fully verifies it (only what it returns is cached, so it
/// must have the key's digest and diff_id); then `merge(job, contents)`, on the calling thread,
/// in job order. Up to `jobs` threads read, biggest layer first; memory stays bounded whatever
/// the size of the image: a thread holds its buffers (a few MiB), and a reading that waits its
/// turn to be merged holds only what the merged tree will hold anyway (entries and captured
/// parts). `read` runs on worker threads and must be thread-safe. The first failure in job
/// order is rethrown once every thread has stopped; layers above a failure are not started.
///
/// Digests (with `stated`): a layer is read with the plan of the paths the layers merged so
/// far state. With one job that is every layer below it; a layer read in parallel with those
/// below (or found in the cache) may have missed some, and is then read again, on the calling
/// thread, with the whole plan: rare, as it takes a later layer writing over a library a
/// package installed (IC015's case). So the merged result is the same whatever `jobs` is.
void ReadLayers(const std::vector<LayerJob>& jobs, const ReadLayersOptions& options,
                const std::function<LayerContents(const LayerJob&, const TrackBlob&)>& read,
                const std::function<void(const LayerJob&, LayerContents&)>& merge);

}  // namespace imgcheck::image

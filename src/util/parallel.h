// Work split over a few threads of this process, for passes whose items are independent
// (parsing files); the caller keeps the results' order.
#pragma once

#include <cstddef>
#include <functional>

namespace imgcheck::util {

/// Calls fn(i) for every i in [0, n) on up to `threads` threads, the caller's included, each
/// taking the next index. Returns when all are done; when some threw, rethrows the exception
/// of the lowest index, as a loop would (every lower index was taken, and ran, before it).
void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace imgcheck::util

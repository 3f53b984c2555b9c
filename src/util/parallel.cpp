#include "util/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace imgcheck::util {

void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  size_t failed_at = n;
  std::exception_ptr failure;
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(mu);
        if (i < failed_at) failed_at = i, failure = std::current_exception();
        next = n;  // no new index; those taken run to their end
      }
    }
  };
  std::vector<std::thread> helpers;
  size_t count = std::min(static_cast<size_t>(std::max(threads, 1)), n);
  // A thread the system will not give is work for the ones it gave (a joinable thread left in
  // `helpers` by a throw would terminate the process).
  for (size_t t = 1; t < count; ++t) try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  work();
  for (std::thread& t : helpers) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace imgcheck::util

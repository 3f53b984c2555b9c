// A fixed set of threads over a bounded queue: where the server's blocking work runs (deciding
// a review, looking up a tag), so that neither the I/O thread nor the number of requests sets
// how many threads exist.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace imgcheck::serve {

class Pool {
 public:
  /// `threads` workers (at least 1); at most `queue_limit` jobs wait for one.
  Pool(int threads, size_t queue_limit);
  /// Drops the queued jobs and joins the workers once they are out (each thread's exit frees
  /// its per-thread state: OpenSSL's error queue). A job still running after kStopWait is left
  /// to finish on its own (its thread detached), so a job must own (shared_ptr) what it
  /// touches or be finished before this.
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  /// Queues `job`; false (and `job` is dropped) when the queue is full or the pool stopping.
  bool Submit(std::function<void()> job);
  /// Jobs queued or running.
  size_t Busy() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::vector<std::thread> threads_;
};

}  // namespace imgcheck::serve

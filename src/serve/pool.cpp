#include "serve/pool.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "serve/log.h"

namespace imgcheck::serve {

namespace {
// How long ~Pool waits for a running job (the server has already waited --shutdown-grace).
constexpr std::chrono::seconds kStopWait{2};
}  // namespace

struct Pool::State {
  std::mutex mu;
  std::condition_variable work, exited;
  std::deque<std::function<void()>> queue;
  size_t limit = 0, running = 0, live = 0;
  bool stopping = false;
};

Pool::Pool(int threads, size_t queue_limit) : state_(std::make_shared<State>()) {
  state_->limit = queue_limit;
  state_->live = static_cast<size_t>(std::max(1, threads));
  for (size_t i = 0; i < state_->live; ++i)
    threads_.emplace_back([s = state_] {
      std::unique_lock lock(s->mu);
      for (;;) {
        s->work.wait(lock, [&] { return s->stopping || !s->queue.empty(); });
        if (s->stopping) {
          --s->live;
          s->exited.notify_all();
          return;
        }
        std::function<void()> job = std::move(s->queue.front());
        s->queue.pop_front();
        ++s->running;
        lock.unlock();
        try {
          job();
        } catch (const std::exception& e) {  // a job answers its own errors; this is a bug
          Log(std::string("internal error in a pool job: ") + e.what());
        }
        job = nullptr;
        lock.lock();
        --s->running;
      }
    });
}

Pool::~Pool() {
  bool out;
  {
    std::unique_lock lock(state_->mu);
    state_->stopping = true;
    state_->queue.clear();
    state_->work.notify_all();
    out = state_->exited.wait_for(lock, kStopWait, [&] { return state_->live == 0; });
  }
  for (std::thread& t : threads_) out ? t.join() : t.detach();
}

bool Pool::Submit(std::function<void()> job) {
  std::lock_guard lock(state_->mu);
  if (state_->stopping || state_->queue.size() >= state_->limit) return false;
  state_->queue.push_back(std::move(job));
  state_->work.notify_one();
  return true;
}

size_t Pool::Busy() const {
  std::lock_guard lock(state_->mu);
  return state_->queue.size() + state_->running;
}

}  // namespace imgcheck::serve

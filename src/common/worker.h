#pragma once
// A thread of its own that works through a queue of jobs for the engine's loop, which takes the
// results on a later pass: how the loop hands off work that may take long (an interpreter's
// package listing, a search's proposals) and keeps running, watching and answering meanwhile.
// The thread starts at the first job with every signal blocked (SIGCHLD and SIGINT are the
// loop's, taken synchronously). Inline mode does each job at once, in Start: a deterministic
// stand-in for tests with a fake clock.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace drover {

template <typename Job, typename Result>
class Worker {
 public:
  // `work` does one job (on the worker's thread); `stopping()` says the owner is going, so a
  // long job may end early. `done`, if set, is called after each job on the same thread (to
  // wake the loop).
  using Work = std::function<Result(Job&, const std::function<bool()>& stopping)>;
  explicit Worker(Work work, std::function<void()> done = {}, bool inline_jobs = false)
      : work_(std::move(work)), done_(std::move(done)), inline_(inline_jobs) {}
  // Queued jobs are dropped; the one in progress is waited for.
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      queue_.clear();
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void Start(Job job) {
    if (inline_) {
      Result r = work_(job, [] { return false; });
      std::lock_guard<std::mutex> lock(mu_);
      finished_.push_back(std::move(r));
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    if (!thread_.joinable()) {
      sigset_t all, old;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old);
      thread_ = std::thread([this] { Loop(); });
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    wake_.notify_one();
  }
  // The results of the jobs done since the last call, in the order of their jobs.
  std::vector<Result> TakeFinished() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Result> out;
    out.swap(finished_);
    return out;
  }
  // Whether a job is queued or being done.
  bool Busy() const {
    std::lock_guard<std::mutex> lock(mu_);
    return working_ || !queue_.empty();
  }
  // Blocks until every started job is done.
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return !working_ && queue_.empty(); });
  }
  // Blocks until every started job is done or `ms` have passed; then the jobs not begun are
  // dropped and only the one in progress is waited for (a queue someone filled must not hold a
  // shutdown for as long as all of it would take).
  void WaitIdleFor(int64_t ms) {
    std::unique_lock<std::mutex> lock(mu_);
    if (idle_.wait_for(lock, std::chrono::milliseconds(ms),
                       [&] { return !working_ && queue_.empty(); })) {
      return;
    }
    queue_.clear();
    idle_.wait(lock, [&] { return !working_; });
  }

 private:
  void Loop() {
    const std::function<bool()> stopping = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return stop_;
    };
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) break;
      Job job = std::move(queue_.front());
      queue_.pop_front();
      working_ = true;
      lock.unlock();
      Result r = work_(job, stopping);
      lock.lock();
      finished_.push_back(std::move(r));
      working_ = false;
      if (queue_.empty()) idle_.notify_all();
      if (done_) {
        lock.unlock();
        done_();
        lock.lock();
      }
    }
    working_ = false;
    idle_.notify_all();
  }

  Work work_;
  std::function<void()> done_;
  bool inline_ = false;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Job> queue_;
  std::vector<Result> finished_;
  bool working_ = false;
  bool stop_ = false;
  std::thread thread_;  // started at the first job
};

}  // namespace drover

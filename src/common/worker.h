#pragma once
// A thread of its own that works through a queue of jobs for the engine's loop, which takes the
// results on a later pass: how the loop hands off work that may take long (an interpreter's
// package listing, a search's proposals) and keeps running, watching and answering meanwhile.
// The thread starts at the first job with every signal blocked (SIGCHLD and SIGINT are the
// loop's, taken synchronously). Inline mode does each job at once, in Start: a deterministic
// stand-in for tests with a fake clock. Jobs are done in the order they came, or, with `turn_of`,
// in turns: one job of each key (a user) after the other, in the order they came within a key, so
// one key's many jobs never keep another's waiting behind all of them.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
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
  // Whose turn a job is taken in ("" for all when not set).
  using TurnOf = std::function<std::string(const Job&)>;
  explicit Worker(Work work, std::function<void()> done = {}, bool inline_jobs = false,
                  TurnOf turn_of = {})
      : work_(std::move(work)),
        done_(std::move(done)),
        inline_(inline_jobs),
        turn_of_(std::move(turn_of)) {}
  // Queued jobs are dropped; the one in progress is waited for.
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      queues_.clear();
      queued_ = 0;
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
    std::string key = turn_of_ ? turn_of_(job) : std::string();
    queues_[std::move(key)].push_back(std::move(job));
    ++queued_;
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
    return working_ || queued_ > 0;
  }
  // Blocks until every started job is done.
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return !working_ && queued_ == 0; });
  }
  // Blocks until every started job is done or `ms` have passed; then the jobs not begun are
  // dropped and only the one in progress is waited for (a queue someone filled must not hold a
  // shutdown for as long as all of it would take).
  void WaitIdleFor(int64_t ms) {
    std::unique_lock<std::mutex> lock(mu_);
    if (idle_.wait_for(lock, std::chrono::milliseconds(ms),
                       [&] { return !working_ && queued_ == 0; })) {
      return;
    }
    queues_.clear();
    queued_ = 0;
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
      wake_.wait(lock, [&] { return stop_ || queued_ > 0; });
      if (stop_) break;
      Job job = Next();
      working_ = true;
      lock.unlock();
      Result r = work_(job, stopping);
      lock.lock();
      finished_.push_back(std::move(r));
      working_ = false;
      if (queued_ == 0) idle_.notify_all();
      if (done_) {
        lock.unlock();
        done_();
        lock.lock();
      }
    }
    working_ = false;
    idle_.notify_all();
  }

  // The next job: the first key with jobs after the one served last (wrapping), the oldest of
  // its jobs. Called with mu_ held and a job queued.
  Job Next() {
    auto it = served_any_ ? queues_.upper_bound(last_key_) : queues_.begin();
    if (it == queues_.end()) it = queues_.begin();
    Job job = std::move(it->second.front());
    it->second.pop_front();
    --queued_;
    last_key_ = it->first;
    served_any_ = true;
    if (it->second.empty()) queues_.erase(it);
    return job;
  }

  Work work_;
  std::function<void()> done_;
  bool inline_ = false;
  TurnOf turn_of_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::map<std::string, std::deque<Job>> queues_;  // by turn key
  size_t queued_ = 0;
  std::string last_key_;
  bool served_any_ = false;
  std::vector<Result> finished_;
  bool working_ = false;
  bool stop_ = false;
  std::thread thread_;  // started at the first job
};

}  // namespace drover

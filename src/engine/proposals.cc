#include "engine/proposals.h"

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

namespace drover {

std::vector<Json> ProposalJob::Propose() const {
  return search::ProposeEach(options, space, asks, history);
}

Proposer::Proposer(std::function<void()> wake, bool off_loop, Work work)
    : wake_(std::move(wake)), off_loop_(off_loop), work_(std::move(work)) {
  if (!work_) work_ = [](const ProposalJob& job) { return job.Propose(); };
}

Proposer::~Proposer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    waiting_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ProposalDone Proposer::Do(const ProposalJob& job) const {
  ProposalDone d{job.experiment_id, job.first_index, {}};
  try {
    d.params = work_(job);
  } catch (const std::exception& e) {
    spdlog::error("experiment {}: proposing trials failed: {}", job.experiment_id, e.what());
  }
  return d;
}

void Proposer::Start(ProposalJob job) {
  if (!off_loop_) {
    ProposalDone d = Do(job);
    std::lock_guard<std::mutex> lock(mu_);
    finished_.push_back(std::move(d));
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  waiting_[job.user].push_back(std::move(job));
  if (!thread_.joinable()) {
    // SIGCHLD and SIGINT are the loop's, taken synchronously: none for this thread.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    thread_ = std::thread([this] { Loop(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  cv_.notify_one();
}

std::vector<ProposalDone> Proposer::TakeFinished() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ProposalDone> out;
  out.swap(finished_);
  return out;
}

void Proposer::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return !working_ && waiting_.empty(); });
}

ProposalJob Proposer::Next() {
  auto it = served_any_ ? waiting_.upper_bound(last_user_) : waiting_.begin();
  if (it == waiting_.end()) it = waiting_.begin();
  ProposalJob job = std::move(it->second.front());
  it->second.pop_front();
  last_user_ = it->first;
  served_any_ = true;
  if (it->second.empty()) waiting_.erase(it);
  return job;
}

void Proposer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !waiting_.empty(); });
    if (stop_) break;
    ProposalJob job = Next();
    working_ = true;
    lock.unlock();
    ProposalDone d = Do(job);
    lock.lock();
    finished_.push_back(std::move(d));
    working_ = false;
    if (waiting_.empty()) idle_.notify_all();
    if (wake_) {
      lock.unlock();
      wake_();
      lock.lock();
    }
  }
  working_ = false;
  idle_.notify_all();
}

std::unique_ptr<Proposer> MakeProposer(std::function<void()> wake, bool off_loop) {
  return std::make_unique<Proposer>(std::move(wake), off_loop);
}

}  // namespace drover

#pragma once
// A scripted Slurm for the executor's tests (slurm/cluster.h): it lists what the test puts in
// `queue` and `accounting`, keeps what was submitted and cancelled, and counts its commands.
#include <map>
#include <vector>

#include "slurm/cluster.h"

namespace drover::slurm {

class FakeCluster : public Cluster {
 public:
  Result<int64_t> Submit(const Target&, const Submission& s) override {
    ++commands_;
    submitted.push_back(s);
    const int64_t id = next_id++;
    Job j;
    j.id = id;
    j.name = s.job_name;
    j.state = JobState::kPending;
    j.reason = "Priority";
    queue[id] = j;
    return id;
  }
  Result<std::vector<Job>> List() override {
    ++commands_;
    ++lists;
    std::vector<Job> out;
    for (const auto& [id, j] : queue) out.push_back(j);
    return out;
  }
  Result<std::vector<Job>> Ended(int64_t) override {
    ++commands_;
    ++ended_queries;
    return accounting;
  }
  Status Cancel(int64_t id, int) override {
    ++commands_;
    cancelled.push_back(id);
    return Status::Ok();
  }
  int64_t commands() const override { return commands_; }

  int64_t next_id = 100;
  std::map<int64_t, Job> queue;
  std::vector<Job> accounting;
  std::vector<Submission> submitted;
  std::vector<int64_t> cancelled;
  int lists = 0, ended_queries = 0;

 private:
  int64_t commands_ = 0;
};

}  // namespace drover::slurm

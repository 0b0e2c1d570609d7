#include "engine/proposals.h"

#include <spdlog/spdlog.h>

namespace drover {

std::vector<Json> ProposalJob::Propose() const {
  return search::ProposeEach(options, space, asks, history);
}

Proposer::Proposer(std::function<void()> wake, bool off_loop, Work work)
    : work_(work ? std::move(work) : Work([](const ProposalJob& job) { return job.Propose(); })),
      worker_([this](ProposalJob& job, const std::function<bool()>&) { return Do(job); },
              std::move(wake), /*inline_jobs=*/!off_loop,
              [](const ProposalJob& job) { return job.user; }) {}

TrialOrigin ProposalJob::Origin() const {
  return search::ProposalOrigin(options, space, search::CountFinished(history));
}

ProposalDone Proposer::Do(const ProposalJob& job) const {
  ProposalDone d{job.experiment_id, job.first_index, {}, job.Origin()};
  try {
    d.params = work_(job);
  } catch (const std::exception& e) {
    spdlog::error("experiment {}: proposing trials failed: {}", job.experiment_id, e.what());
  }
  return d;
}

std::unique_ptr<Proposer> MakeProposer(std::function<void()> wake, bool off_loop) {
  return std::make_unique<Proposer>(std::move(wake), off_loop);
}

}  // namespace drover

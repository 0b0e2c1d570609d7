#include "engine/proposals.h"

#include <spdlog/spdlog.h>

namespace drover {

std::vector<Json> ProposalJob::Propose() const {
  return search::ProposeEach(options, space, asks, history);
}

std::unique_ptr<Proposer> MakeProposer(std::function<void()> wake, bool off_loop) {
  auto work = [](ProposalJob& job, const std::function<bool()>&) {
    ProposalDone d{job.experiment_id, job.first_index, {}};
    try {
      d.params = job.Propose();
    } catch (const std::exception& e) {
      spdlog::error("experiment {}: proposing trials failed: {}", job.experiment_id, e.what());
    }
    return d;
  };
  return std::make_unique<Proposer>(work, std::move(wake), !off_loop);
}

}  // namespace drover

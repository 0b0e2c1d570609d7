#pragma once
// Output collection, a component of the engine (docs/pipelines.md, docs/architecture.md): the
// runs whose succeeded attempt's outputs are being stored off the loop, and those held for want
// of room under the store (a full disk is the machine's, not the run's: stored again after 1 s,
// doubling to 30 s). A run ends when its outputs are stored, or could not be; the engine decides
// how (TakeFinished, TakeDue), the component keeps who is where.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "engine/output_collector.h"
#include "engine/retrying.h"
#include "model/run_lifecycle.h"

namespace drover {

class OutputCollection : public RunLifecycle {
 public:
  // `wake`: called on the collector's thread after each job (the loop's wait returns); the
  // collector's thread is started at the first job, or jobs run at once when not `off_loop`.
  OutputCollection(std::function<void()> wake, bool off_loop)
      : wake_(std::move(wake)), off_loop_(off_loop) {}

  // Stores a succeeded stage's outputs off the loop: the run is collecting until its result is
  // taken.
  void Start(CollectJob job);
  bool Collecting(int64_t run_id) const { return collecting_.count(run_id) > 0; }
  // Outputs being stored or held for room: the loop stays for them.
  bool busy() const { return in_flight_ > 0; }

  // What the engine says of a run the collection holds.
  enum class Fate { kWaiting, kCancelled, kGone };
  using Look = std::function<Fate(int64_t run_id)>;

  struct Due {
    int64_t run_id = 0;
    bool cancelled = false;  // to end cancelled (else: Start its job again, now)
  };
  // The held runs to act on now: those whose retry is due, and those cancelled meanwhile; runs
  // gone are forgotten.
  std::vector<Due> TakeDue(Instant now, const Look& look);

  struct Stored {
    int64_t run_id = 0;
    Status status;  // FailedPrecondition: an output was not written
    std::vector<Artifact> artifacts;
  };
  // The jobs that came back and end their runs. A job out of room for a run not cancelled is
  // held instead (TakeDue retries it) and not returned.
  std::vector<Stored> TakeFinished(Instant now, const Look& look);

  void OnFinal(const Run& run) override { collecting_.erase(run.id); }

 private:
  std::function<void()> wake_;
  bool off_loop_;
  std::unique_ptr<OutputCollector> collector_;  // made at the first job
  std::set<int64_t> collecting_;
  int in_flight_ = 0;  // jobs with the collector, and held runs
  std::map<int64_t, Retrying> holds_;  // runs held for want of room, with their backoff
};

}  // namespace drover

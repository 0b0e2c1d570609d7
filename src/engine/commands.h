#pragma once
// What other threads (the daemon's HTTP workers) ask of the engine's loop: typed values, not
// closures, so each one can be named in a log line, tested on its own and answered the same way.
// Engine::Post queues one and returns the future of its reply; the loop dispatches it
// (Engine::Dispatch) between two iterations, so it sees and changes the engine's state alone.
#include <cstdint>
#include <future>
#include <mutex>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "engine/cleanup.h"
#include "model/cleanup.h"
#include "model/gpu.h"
#include "model/run.h"
#include "model/spec.h"

namespace drover {

struct PreparedSubmit;
struct ProposalJob;
struct SubmitResult;
struct GpuView;

namespace cmd {
struct CheckSubmit {  // whether runs of the spec could ever start on this pool
  Spec spec;
};
struct Commit {  // record a prepared experiment and queue its runs
  std::shared_ptr<PreparedSubmit> prepared;
};
struct CancelRun {
  int64_t run_id = 0;
};
struct CancelExperiment {
  int64_t experiment_id = 0;
};
struct SetPriority {
  int64_t run_id = 0;
  int priority = 0;
};
// Queue finished runs of an experiment again as new attempts of the same runs (Engine::Retry):
// the failed ones, the cancelled ones and those named. At least one must be asked for.
struct Retry {
  int64_t experiment_id = 0;
  bool failed = false;
  bool cancelled = false;
  std::vector<int64_t> run_ids;  // named runs, in any finished state
  // Run the workdir as it is now (a new snapshot of it, for these runs from their next attempt),
  // not the code recorded at the submit.
  bool current_code = false;
};
// Delete experiments with everything recorded about them (drover rm); none may have unfinished
// runs. dry_run: only say what would go.
struct Remove {
  std::vector<int64_t> experiment_ids;
  bool dry_run = false;
};
// Collect the store's garbage (drover gc): engine/cleanup.h says what.
struct CollectGarbage {
  GcOptions options;
  bool dry_run = false;
};
struct ReadGpus {};  // the pool as the engine holds it, with the latest telemetry
// Ask/tell on a search (docs/search.md): its next `count` configs, honouring its running trials
// (nothing recorded); a result for a config the caller ran (value nullopt: failed), stored as an
// observation; a config of the caller's choosing run as the search's next trial.
struct Suggest {
  int64_t experiment_id = 0;
  int count = 1;
};
struct Tell {
  int64_t experiment_id = 0;
  Json params = Json::object();
  std::optional<double> value;
};
struct AddTrial {
  int64_t experiment_id = 0;
  Json params = Json::object();
};
}  // namespace cmd

using Command = std::variant<cmd::CheckSubmit, cmd::Commit, cmd::CancelRun, cmd::CancelExperiment,
                             cmd::SetPriority, cmd::Retry, cmd::Remove, cmd::CollectGarbage,
                             cmd::ReadGpus, cmd::Suggest, cmd::Tell, cmd::AddTrial>;
// "check_submit", "commit", "cancel_run", ...: for logs.
std::string_view NameOf(const Command& c);

// What ReadGpus answers.
struct GpuReading {
  std::vector<GpuView> views;
  std::vector<GpuDevice> devices;
  std::vector<GpuSample> samples;
};

// A command's answer: nothing (CheckSubmit, the cancels, SetPriority), the submitted experiment
// (Commit), the runs queued again (Retry), what was (or would be) deleted (Remove,
// CollectGarbage) or the pool (ReadGpus); an error says why the command
// was refused.
// Suggest answers with what proposing takes (the caller proposes, off the loop), AddTrial
// with the run made.
using CommandReply =
    std::variant<std::monostate, std::shared_ptr<SubmitResult>, std::vector<Run>, Cleanup,
                 GpuReading, std::shared_ptr<const ProposalJob>>;

struct PostedCommand {
  Command command;
  std::promise<Result<CommandReply>> reply;
};

// The commands posted for the loop and not taken yet (thread-safe).
class CommandInbox {
 public:
  CommandInbox();
  ~CommandInbox();
  std::future<Result<CommandReply>> Post(Command command);
  // Every command posted so far, in order, for the loop to answer.
  std::vector<PostedCommand> Take();

 private:
  std::mutex mu_;
  std::vector<PostedCommand> posted_;
};

}  // namespace drover

#pragma once
// What other threads (the daemon's HTTP workers) ask of the engine's loop: typed values, not
// closures, so each one can be named in a log line, tested on its own and answered the same way.
// Engine::Post queues one and returns the future of its reply; the loop dispatches it
// (Engine::Dispatch) between two iterations, so it sees and changes the engine's state alone.
#include <cstdint>
#include <future>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "model/gpu.h"
#include "model/spec.h"

namespace drover {

struct PreparedSubmit;
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
struct ReadGpus {};  // the pool as the engine holds it, with the latest telemetry
}  // namespace cmd

using Command = std::variant<cmd::CheckSubmit, cmd::Commit, cmd::CancelRun, cmd::CancelExperiment,
                             cmd::SetPriority, cmd::ReadGpus>;
// "check_submit", "commit", "cancel_run", ...: for logs.
std::string_view NameOf(const Command& c);

// What ReadGpus answers.
struct GpuReading {
  std::vector<GpuView> views;
  std::vector<GpuDevice> devices;
  std::vector<GpuSample> samples;
};

// A command's answer: nothing (CheckSubmit, the cancels, SetPriority), the submitted experiment
// (Commit) or the pool (ReadGpus); an error says why the command was refused.
using CommandReply = std::variant<std::monostate, std::shared_ptr<SubmitResult>, GpuReading>;

struct PostedCommand {
  Command command;
  std::promise<Result<CommandReply>> reply;
};

}  // namespace drover

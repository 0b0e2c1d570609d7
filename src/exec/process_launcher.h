#pragma once
// Starting and stopping run processes. Each run is its own process group (so Ctrl-C at the
// terminal does not reach it, and a timeout or cancel kills it with all its children). The engine
// uses this interface; tests above the executor use a fake (tests/testutil/fake_launcher.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "exec/child.h"
#include "exec/working_copy.h"
#include "model/run.h"
#include "model/spec.h"

namespace drover {

// Which attempt a launch is and what it asks for: what an executor that places attempts itself
// (Slurm, slurm/launcher.h) hands on; the local launcher has the GPUs in the environment already.
struct AttemptRequest {
  int64_t run_id = 0;
  int attempt = 0;
  Resources resources;
  Millis time_limit_ms = 0;  // the spec's timeout (0: none)
  ExecutorSpec executor;     // the spec's executor: (partition, account, ...), where it wrote one
  // The spec's container, pinned (image_id set): the attempt runs in its own container
  // (container/launcher.h wraps the command); unset: on the host.
  std::optional<ContainerSpec> container;
  int64_t experiment_id = 0;
  std::vector<std::string> gpu_uuids;  // the attempt's GPUs, for the runtime's device names (CDI)
  // Host paths the run is given besides its working copy (its checkpoint folder, data, the
  // pipeline's inputs file, drover's Python client): bound at the same path in a container,
  // read-only unless the flag says writable.
  std::vector<std::pair<std::string, bool>> binds;
};

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;   // the complete environment, "KEY=VALUE"
  std::string cwd;
  std::string stdout_path;  // created/truncated; the child's stdout
  std::string stderr_path;  // created/truncated; the child's stderr
  // When set, the run outlives the engine: it is started by the supervisor (exec/supervisor.h)
  // or under a shim (`drover __shim`, exec/shim.h), which records its start and how it ended
  // (the exit record, ExitRecordAt{exit_path, stdout_path}; any old one is replaced at start).
  // Empty: the run itself leads the group and nothing outside the engine records it.
  std::string exit_path;
  // When set, `cwd` is the mount point of this overlay (the run's working copy,
  // exec/working_copy.h), mounted in a private mount namespace of the run before it starts.
  OverlayMount overlay;
  // Data shown read-only in the overlay's working copy (bound in the run's mount namespace; only
  // with an overlay: a copied working copy has symbolic links to the data instead).
  std::vector<DataMount> data;
  // Set: the run executes as this user (a root daemon's runs, docs/lab-server.md); its output
  // files are theirs.
  RunAs run_as;
  AttemptRequest request;
};

struct ProcessExit {
  int pid = 0;           // == the process group id
  int exit_code = -1;    // when it exited normally
  int signal = 0;        // when a signal killed it
  bool lost = false;     // an adopted shim is gone and left no exit file: the end is unknown
  int64_t ended_ms = 0;  // wall-clock end from a shim's exit file; 0 when there is none
  std::string error;     // a shim could not start the program (exit_code 127): why
  // An executor that knows more than the exit status (Slurm: TIMEOUT, PREEMPTED, NODE_FAIL,
  // OUT_OF_MEMORY) says how the attempt ended; unset: the engine classifies the exit itself.
  std::optional<AttemptOutcome> outcome;
  std::string detail;  // in the executor's words, for the attempt's record ("Slurm: TIMEOUT")
};

// Where an executor placed a running attempt, as it changed (a Slurm job's state, node, pending
// reason): stored with the attempt (Attempt::executor) and shown by ls, show and the web UI.
struct PlacementNews {
  int pid = 0;  // the attempt's handle (a Slurm job id)
  Json executor;
};

// The attribute of an attempt's stdout log that holds its exit record when the supervisor wrote
// it there: the same text as an exit file ("<pid> <start ticks>\n", then the end's JSON line).
// A root daemon's (whose logs are their runs' users' files) keeps it in the trusted namespace,
// which only root may write: a user cannot forge the record of their run's start or end.
inline constexpr char kUserExitAttribute[] = "user.drover.exit";
inline constexpr char kTrustedExitAttribute[] = "trusted.drover.exit";
const char* ExitAttribute();  // kTrustedExitAttribute when this process is root

// Where the exit record of a run that outlives the engine is (docs/execution.md, "The exit
// record"): a shim writes the file of its own; the supervisor sets the attribute
// ExitAttribute() of the attempt's stdout log, which costs no inode, and writes the file only
// where the log's file system takes no user attributes. The file, when there is one, is the
// record.
struct ExitRecordAt {
  std::string file;  // <run>-<attempt>.exit (LaunchSpec::exit_path)
  std::string log;   // the attempt's stdout log (LaunchSpec::stdout_path); "": the file only
  bool empty() const { return file.empty(); }
};
// How a start handed over with BeginStart went, reported by a later Wait().
struct StartOutcome {
  int64_t ticket = 0;       // what BeginStart returned
  int pid = 0;              // == the process group id; 0 when it did not start
  int64_t start_ticks = 0;  // StartTicks(pid) when it started
  Status error;             // why it did not start (as Start() would have said)
};

struct WaitResult {
  // Starts handed over with BeginStart that have now started or failed, in the order they were
  // handed over; a process's start is reported before (or with, ahead of) its exit.
  std::vector<StartOutcome> started;
  std::vector<ProcessExit> exits;
  int interrupt_signal =
      0;  // SIGINT/SIGTERM/SIGHUP received by drover itself while waiting, else 0
  std::vector<PlacementNews> placements;
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Where it runs attempts: on this machine (pids and process groups) or as Slurm jobs (the
  // handle is the job id; GPUs are placed by Slurm, not by drover's pool).
  virtual ExecutorKind kind() const { return ExecutorKind::kLocal; }
  // Starts the process as the leader of a new process group; returns its pid (== pgid).
  virtual Result<int> Start(const LaunchSpec& spec) = 0;
  // Whether BeginStart hands a start to another process (the daemon's supervisor) and returns
  // without waiting for it: the caller goes on with its own work while the process starts.
  virtual bool StartsInBackground() const { return false; }
  // Hands the start over and returns a ticket at once; a later Wait() reports how it went
  // (WaitResult::started). An error here means it was not handed over: nothing started. Only
  // where StartsInBackground().
  virtual Result<int64_t> BeginStart(const LaunchSpec& spec) {
    return Status(Code::kInternal, "this launcher starts processes only in the foreground");
  }
  // Sends `sig` to the whole process group. Harmless if it has already ended.
  virtual void SignalGroup(int pgid, int sig) = 0;
  // Waits up to timeout_ms for a started process to end or for an interrupt; returns every exit
  // collected (leftover members of an ended leader's group are killed, so no orphans remain).
  virtual WaitResult Wait(int64_t timeout_ms) = 0;
  // The start time of process `pid` (field 22 of /proc/<pid>/stat, clock ticks since boot), 0
  // when there is no such process. Stored with an attempt, it tells its shim from a later
  // process that reused the pid.
  virtual int64_t StartTicks(int pid) = 0;
  // The value of `name` in the environment process `pid` was started with (nullopt: no such
  // variable, or the process cannot be read). What a start the last engine did not record was
  // given (CUDA_VISIBLE_DEVICES) is read back from it.
  virtual std::optional<std::string> EnvOf(int pid, const std::string& name) {
    return std::nullopt;
  }
  // The process group of `pid` (any process, e.g. one the GPU driver lists), or -1 when unknown.
  // A run's processes are in the group of its attempt's pid, so this attributes GPU memory.
  virtual int GroupOf(int pid) { return -1; }
  // Takes over a shim that is not our child (started by an engine that died): Wait() reports its
  // end like that of a process we started, from its exit record, or with `lost` set when it left
  // none; a pid whose start time is not `start_ticks` is reported gone at once. SignalGroup works
  // on its group while the shim lives.
  virtual void Adopt(int pid, int64_t start_ticks, const ExitRecordAt& record) = 0;
  // Engine::Recover calls these around its adoption: before it, the launcher may look up what it
  // needs to tell live attempts (Slurm: the store's jobs, one squeue; an error stops the
  // recovery: the daemon does not start blind); after it, what no attempt was adopted for may be
  // stopped (a Slurm job the last engine submitted and did not record).
  virtual Status BeginRecovery() { return Status::Ok(); }
  virtual void EndRecovery() {}
  // Makes a Wait() in progress return at once (or the next one, if none is in progress), with
  // whatever it has collected: another thread has work for the waiting one (a posted command).
  // Safe from any thread. The default does nothing (Wait returns at its timeout).
  virtual void Wake() {}
};

// How a shim recorded the end of its run in `path` (LaunchSpec::exit_path; the format is in
// exec/shim.h): exit_code, signal, ended_ms and error as in the file, pid 0. NotFound when the
// file records no end (the shim has not finished, or the group was killed before the run ended).
Result<ProcessExit> ReadExitFile(const std::string& path);

// The pid and start ticks a shim wrote first into its exit file. NotFound when there is no such
// line (the shim never got to start the run).
struct ShimStart {
  int64_t pid = 0;
  int64_t start_ticks = 0;
};
Result<ShimStart> ReadShimStart(const std::string& path);

// ReadExitFile and ReadShimStart over the record wherever it is.
Result<ProcessExit> ReadExitRecord(const ExitRecordAt& at);
Result<ShimStart> ReadRecordedStart(const ExitRecordAt& at);

}  // namespace drover

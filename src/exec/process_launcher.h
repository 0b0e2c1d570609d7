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

// An attempt as its executor knows it: on this machine the leader of its process group (a pid),
// under Slurm a job id, under another executor whatever it numbers its attempts with. The engine
// stores it with the attempt (Attempt::pid, the store's `pid` column), keys its running attempts
// by it and hands it back to the launcher; nothing above the launcher reads it as a pid.
struct ExecHandle {
  int64_t id = 0;
  constexpr ExecHandle() = default;
  constexpr explicit ExecHandle(int64_t v) : id(v) {}
  bool valid() const { return id > 0; }
  auto operator<=>(const ExecHandle&) const = default;
};

// How the engine stops an attempt: asks it to end (SIGTERM to a process group; Slurm's scancel
// with SIGTERM, then its KillWait) or ends it now (SIGKILL).
enum class StopSignal { kTerminate, kKill };

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
  ExecHandle handle;     // the attempt's (Start)
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
  ExecHandle handle;  // the attempt's (a Slurm job id)
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
  ExecHandle handle;        // the attempt's; invalid when it did not start
  int64_t identity = 0;     // Identity(handle) when it started
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
  // Where it runs attempts: on this machine (process groups: the handle is the leader's pid) or
  // as Slurm jobs (the handle is the job id; GPUs are placed by Slurm, not by drover's pool).
  virtual ExecutorKind kind() const { return ExecutorKind::kLocal; }
  // Starts the attempt (on this machine: a process leading a new process group).
  virtual Result<ExecHandle> Start(const LaunchSpec& spec) = 0;
  // Whether BeginStart hands a start to another process (the daemon's supervisor) and returns
  // without waiting for it: the caller goes on with its own work while the process starts.
  virtual bool StartsInBackground() const { return false; }
  // Hands the start over and returns a ticket at once; a later Wait() reports how it went
  // (WaitResult::started). An error here means it was not handed over: nothing started. Only
  // where StartsInBackground().
  virtual Result<int64_t> BeginStart(const LaunchSpec& spec) {
    return Status(Code::kInternal, "this launcher starts processes only in the foreground");
  }
  // Stops the attempt (on this machine: the signal to its whole process group). Harmless if it
  // has already ended.
  virtual void Stop(ExecHandle attempt, StopSignal how) = 0;
  // Waits up to timeout_ms for a started process to end or for an interrupt; returns every exit
  // collected (leftover members of an ended leader's group are killed, so no orphans remain).
  virtual WaitResult Wait(int64_t timeout_ms) = 0;
  // What tells this attempt from a later one given the same handle (on this machine: the
  // process's start time, field 22 of /proc/<pid>/stat, clock ticks since boot); 0 when the
  // attempt is gone. Stored with an attempt (Attempt::pid_start).
  virtual int64_t Identity(ExecHandle attempt) = 0;
  // The value of `name` in the environment the attempt was started with (nullopt: no such
  // variable, or it cannot be read). What a start the last engine did not record was given
  // (CUDA_VISIBLE_DEVICES) is read back from it.
  virtual std::optional<std::string> EnvOf(ExecHandle attempt, const std::string& name) {
    return std::nullopt;
  }
  // The attempt a process of this machine belongs to (one the GPU driver lists), if any: a
  // run's processes are in its attempt's process group, so this attributes GPU memory.
  virtual std::optional<ExecHandle> OwnerOf(int64_t pid) { return std::nullopt; }
  // Where the executor put an attempt it started or adopted, as stored with it
  // (Attempt::executor: {"kind": "slurm", "job_id": 12, "state": "SUBMITTED"}); an empty
  // object on this machine. Later changes come as PlacementNews.
  virtual Json PlacedAs(ExecHandle attempt) { return Json::object(); }
  // The words for the run's start event ("submitted as Slurm job 12"); "": the engine says
  // which GPUs it is on.
  virtual std::string StartNote(ExecHandle attempt) { return ""; }
  // Whether an attempt placed as `placement` (PlacedAs, PlacementNews::executor) still waits for
  // the executor to run it (a Slurm job pending): its timeout and stall clocks start when it
  // runs.
  virtual bool WaitsToRun(const Json& placement) const { return false; }
  // Takes over an attempt this launcher did not start (an engine that died started it): Wait()
  // reports its end like that of one it started, from its exit record, or with `lost` set when
  // it left none; one whose Identity is not `identity` is reported gone at once. Stop works on
  // it while it lives.
  virtual void Adopt(ExecHandle attempt, int64_t identity, const ExitRecordAt& record) = 0;
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

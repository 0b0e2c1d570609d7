#pragma once
// Starting a run's process from a ChildPlan of plain values, so the same plan is carried out by
// the engine's launcher or by the supervisor (exec/supervisor.h), the small helper process the
// daemon starts its runs from. A plain run is spawned with clone(CLONE_VM | CLONE_VFORK) (no copy
// of the caller's memory, and fewer steps than posix_spawn: see SpawnEntry); the shim (exec/shim.h), which lives as long as the run and so cannot be a vfork, and a
// run whose working copy is an overlay mounted in its own mount namespace between fork and exec,
// are forked.
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/spawn.h"  // DropTo, kChildDefaultSignals
#include "exec/working_copy.h"

namespace drover {

// Whose rights a run has (docs/lab-server.md, "Runs as their submitter"): a root daemon starts
// each run as its submitter, with their uid, primary gid and supplementary groups; unset (uid
// -1), the run keeps the starter's.
struct RunAs {
  int64_t uid = -1;
  int64_t gid = -1;
  std::vector<uint32_t> groups;
  bool set() const { return uid >= 0; }
};

struct ChildPlan {
  // With `shim`, the child becomes the run's shim (ShimMain): it starts `program` with `argv`
  // and `env` in its group and records the end in `exit_path`. Without, it execs `exec_path`
  // with `argv` and `env`.
  bool shim = false;
  std::string exit_path;
  // The attempt's stdout log, on whose attribute the supervisor keeps the exit record
  // (ExitRecordAt); a shim writes exit_path.
  std::string exit_log;
  std::string program;    // the resolved run program (the shim's), "" = not found
  std::string exec_path;  // what is exec'd without a shim
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;  // "" = stay where we are
  bool mount_overlay = false;
  PreparedOverlay overlay;
  // The run (not its shim, which stays the starter's to record the end) drops to these rights
  // after its working copy is mounted and before it enters its folder.
  RunAs run_as;
};

// How a fork went: the child's pid (0 when there is none), and when its setup failed, the errno
// and the name of the step (the child has exited or been killed then, and is still to be reaped
// by its parent).
struct ForkOutcome {
  pid_t pid = 0;
  int err = 0;
  std::string failed_step;
  int64_t start_ticks = 0;  // the child's start time as ReadProcStat gives it (0: unknown)
};

// Starts a child that leads a new process group with stdin from /dev/null, stdout/stderr on
// out_fd/err_fd, clean signal dispositions and mask, and carries out `plan`; returns once the
// child has exec'd (or, under a shim, started the run) or failed. The start time comes from the
// boot clock read around the start where it can (BootTicks), else from /proc. A forked child whose setup
// hangs (a mount on a dead network file system) is killed after 30 s. Allocates before the fork
// only; the child allocates nothing.
ForkOutcome StartChild(const ChildPlan& plan, int out_fd, int err_fd);

// Clocks for the launcher, the shim and the supervisor (libc only, no allocation: they also run
// in forked children), in milliseconds.
int64_t MonotonicMs();
int64_t WallMs();

// The boot clock in the clock ticks of /proc/<pid>/stat (floor of CLOCK_BOOTTIME / tick). The
// kernel stamps a new process with that clock while it creates it, so a child started between
// two readings of the same tick started in that tick: its start time, with no read of /proc (which
// cost a tenth of the engine's loop per short run). -1 when the clock cannot be read.
int64_t BootTicks();

// Field 3 (state) and field 22 (start time, clock ticks since boot) of /proc/<pid>/stat; false
// when there is no such process. One read() into a stack buffer, no allocation.
bool ReadProcStat(int pid, char* state, int64_t* start_ticks);

}  // namespace drover

#pragma once
// A run's process made by fork() rather than posix_spawn: the shim (exec/shim.h), which lives as
// long as the run and so cannot be a vfork, and a run whose working copy is an overlay mounted in
// its own mount namespace between fork and exec. Everything the child does is described by a
// ChildPlan of plain values, so the same plan is carried out in a child of the engine or in a
// child of the spawner (exec/spawner.h), the small helper process the daemon forks its runs from.
#include <sys/types.h>

#include <string>
#include <vector>

#include "exec/working_copy.h"

namespace drover {

struct ChildPlan {
  // With `shim`, the child becomes the run's shim (ShimMain): it starts `program` with `argv`
  // and `env` in its group and records the end in `exit_path`. Without, it execs `exec_path`
  // with `argv` and `env`.
  bool shim = false;
  std::string exit_path;
  std::string program;    // the resolved run program (the shim's), "" = not found
  std::string exec_path;  // what is exec'd without a shim
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;  // "" = stay where we are
  bool mount_overlay = false;
  PreparedOverlay overlay;
};

// How a fork went: the child's pid (0 when there is none), and when its setup failed, the errno
// and the name of the step (the child has exited or been killed then, and is still to be reaped
// by its parent).
struct ForkOutcome {
  pid_t pid = 0;
  int err = 0;
  std::string failed_step;
};

// Forks a child that leads a new process group with stdin from /dev/null, stdout/stderr on
// out_fd/err_fd, and carries out `plan`; returns once the child has exec'd (or, under a shim,
// started the run) or failed. With `clone_parent` the child is made a child of our parent
// (CLONE_PARENT), which the spawner uses so that the engine reaps its runs as its own children.
// A child whose setup hangs (a mount on a dead network file system) is killed after 30 s.
// Allocates before the fork only; the child allocates nothing.
ForkOutcome ForkChild(const ChildPlan& plan, int out_fd, int err_fd, bool clone_parent);

}  // namespace drover

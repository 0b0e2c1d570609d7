#pragma once
// The one way drover starts a process without copying its memory: clone(CLONE_VM | CLONE_VFORK),
// the child on a stack of its own, setting itself up with async-signal-safe calls only and then
// exec'ing. A run's process (exec/child.h) and a short helper (common/subprocess.h) are started
// by it. The child leads a new process group, has stdin from /dev/null (or `in_fd`), stdout and
// stderr on the given descriptors, no other descriptor of ours, the signal dispositions of
// kChildDefaultSignals at their defaults and an empty signal mask.
#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace drover {

// The signals drover catches, ignores or blocks: a child's disposition of each is reset to the
// default before it execs (every other signal is at its default in drover already, and exec
// resets any caught one).
inline constexpr int kChildDefaultSignals[] = {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP, SIGQUIT};

// Takes `who`'s rights for good (supplementary groups, then gid, then uid: real, effective and
// saved), with raw syscalls that change only the calling process (glibc's wrappers would signal
// every thread of a process a vfork child shares memory with). Async-signal-safe. Returns 0 or
// the errno of the step that failed.
int DropTo(uint32_t uid, uint32_t gid, const uint32_t* groups, size_t ngroups);

// Everything the child needs, prepared by the caller (the child allocates nothing).
struct SpawnPlan {
  const char* exec_path = nullptr;  // a path: nothing is looked up in PATH here
  char* const* argv = nullptr;      // null-terminated
  char* const* envp = nullptr;      // null-terminated
  const char* cwd = nullptr;        // nullptr: stay
  int out_fd = -1;                  // the child's stdout
  int err_fd = -1;                  // the child's stderr
  // Set (uid >= 0): the child takes these rights before it enters `cwd` and execs.
  int64_t uid = -1;
  int64_t gid = -1;
  const uint32_t* groups = nullptr;
  size_t ngroups = 0;
  // The child is killed (SIGKILL) when the thread that started it ends, as when its process dies
  // (PR_SET_PDEATHSIG): for helpers, which must not outlive the daemon that waits for them. Never
  // for a run, which outlives a daemon that is killed.
  bool die_with_parent = false;
};

struct SpawnOutcome {
  pid_t pid = 0;                    // 0 when it did not start
  int err = 0;                      // the errno of the step that failed
  const char* failed_step = nullptr;  // that step ("exec", "setpgid", ...); nullptr on success
};

// Returns once the child has exec'd or failed; a child that failed is reaped here.
SpawnOutcome SpawnVfork(const SpawnPlan& plan);

}  // namespace drover

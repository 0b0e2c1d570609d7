#pragma once
// The spawner: a small helper process that forks the daemon's runs.
//
// A run under a shim is a fork() (exec/child.h), and forking the daemon itself, with its threads,
// its heap and the store's caches, costs a copy of its page tables per run and then a
// copy-on-write fault in the daemon for every page it writes while any shim still shares it
// (bench/README.md, "Launch throughput"). So the daemon forks the spawner once, first thing,
// while it is still small and has one thread, and asks it to fork each run instead. The spawner
// makes every child with CLONE_PARENT: the child is the daemon's own, so the daemon reaps it,
// signals it and reads its exit file exactly as when it forks by itself; the spawner only forks.
//
// Requests go over a Unix socket pair: a ChildPlan (child.h) encoded as length-prefixed strings,
// with the run's stdout and stderr descriptors attached (SCM_RIGHTS); the answer is the child's
// pid or the errno and step that failed. The spawner exits when the daemon closes its end (or
// dies); runs already started are not its children and go on. If it goes away early, the
// launcher forks by itself again.
#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "exec/child.h"

namespace drover {

class Spawner {
 public:
  // Forks the spawner now. Call it while the process is small and single-threaded (the
  // PosixLauncher that owns it is made first thing in `drover serve`).
  static Result<std::unique_ptr<Spawner>> Start();
  ~Spawner();  // closes the socket (the spawner then exits) and reaps it

  // Has the spawner fork a child that carries out `plan` (ForkChild with clone_parent). An error
  // Status means the spawner could not be asked (it is gone): the caller forks by itself.
  Result<ForkOutcome> Fork(const ChildPlan& plan, int out_fd, int err_fd);

  pid_t pid() const { return pid_; }

  // The encoding of a plan, exposed for tests.
  static std::string Encode(const ChildPlan& plan);
  static Result<ChildPlan> Decode(const std::string& bytes);

  // The largest request (argv and environment together): the kernel's own limit for exec is
  // lower, so a run that does not fit could not start anyway.
  static constexpr size_t kMaxRequestBytes = 8 << 20;

 private:
  Spawner(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  void Stop();
  pid_t pid_ = -1;
  int fd_ = -1;
};

}  // namespace drover

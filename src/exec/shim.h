#pragma once
// The shim: a run's tiny supervisor, the drover binary itself in a hidden mode
// (`drover __shim <exit_path> -- <program> [args...]`, dispatched first thing in main()).
// PosixLauncher starts it as the leader of the run's process group; it starts the run in that
// group, waits for it, records how it ended in <exit_path> (so the end survives the engine: a
// restarted engine reads it, or adopts a shim still running), then SIGKILLs the whole group, itself
// included, so nothing of the run outlives it. See docs/execution.md, "Shim and adoption".
//
// The exit file has the shim's pid and start ticks on its first line, written when it starts,
// and the run's end as one JSON line appended (one write) when it ends:
//   12345 987654
//   {"exit_code": N, "signal": S, "ended_ms": T}
//   {"exit_code": 127, "signal": 0, "ended_ms": T, "error": "cannot start 'x': ..."}
// exit_code is -1 when signal S killed the run; T is wall-clock milliseconds since the epoch.
// One file per attempt, not two: a file costs an inode, and inodes are what launching many short
// runs costs on a real disk (bench/README.md, "Launch throughput").
// It uses libc only (no drover library, no allocation beyond a few strings), so it could also
// be built as a separate static binary; ReadExitFile (process_launcher.h) reads its file.
#include <string>
#include <string_view>

namespace drover {

// The shim's main(); argv[1] is "__shim". Returns only on a usage error (2) or, when the exit file
// cannot be written, with the run's own status mirrored (its exit code, or its signal re-raised).
int RunShim(int argc, char** argv);

// The shim's work, in a process that already leads the run's group with the run's stdio and cwd:
// PosixLauncher calls it in a child it fork()ed (no exec, so no dynamic loading per run: the
// launch-throughput benchmark needs that), RunShim after parsing its command line. Everything is
// prepared by the caller, so nothing here allocates before the run starts. First it writes
// "<pid> <start ticks>\n" to the exit file: an engine that dies before it records the pid finds
// the shim through that line (ReadShimStart), and its absence proves the run never started.
struct RunAs;  // exec/child.h
struct ShimTask {
  const char* exit_path = nullptr;
  const char* program = nullptr;  // resolved path of argv[0]; null or "" = not found
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  // Closed once the start line is written (the launcher waits for that before it returns, so an
  // engine that dies right after a start finds the run through its exit file); -1: none.
  int started_fd = -1;
  // Set: the run (not the shim) takes these rights before it execs (child.h, RunAs).
  const RunAs* run_as = nullptr;
};
[[noreturn]] void ShimMain(const ShimTask& task);

// Resolves `prog` as execvp would, against `path` (the value of PATH). Relative PATH entries and
// relative programs with a '/' are taken from `cwd` when it is not empty (the directory the program
// will run in). Returns "" when PATH holds no such executable file.
std::string FindProgram(const std::string& prog, std::string_view path, const std::string& cwd);

}  // namespace drover

#pragma once
// Runs the real drover binary (path from $DROVER_BIN, set by CTest) and captures what it prints.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace drover::testing {

// `drover run` in these tests keeps its engine in its own process, as in CI (the tests of the
// daemon it starts on demand unset this themselves).
inline const bool kRunInForegroundForTests = [] {
  ::setenv("DROVER_FOREGROUND", "1", /*overwrite=*/0);
  return true;
}();

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string DroverBin() {
  const char* bin = std::getenv("DROVER_BIN");
  return bin ? bin : "./drover";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Starts drover with `args` in the background; output goes to the two files, stdin comes from
// `in_path`.
inline pid_t SpawnDrover(const std::vector<std::string>& args, const std::string& out_path,
                         const std::string& err_path, const std::string& cwd = "",
                         const std::string& in_path = "/dev/null") {
  std::vector<std::string> argv = {DroverBin()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  pid_t pid = -1;
  posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

inline int WaitExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline CliResult RunDrover(const std::vector<std::string>& args, const std::string& cwd = "") {
  static int n = 0;
  auto base = std::filesystem::temp_directory_path() /
              ("drover-cli-" + std::to_string(getpid()) + "-" + std::to_string(n++));
  std::string out = base.string() + ".out", err = base.string() + ".err";
  CliResult r;
  r.exit_code = WaitExit(SpawnDrover(args, out, err, cwd));
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// RunDrover with `input` on its standard input.
inline CliResult RunDroverWithInput(const std::vector<std::string>& args, const std::string& input,
                                    const std::string& cwd = "") {
  static int n = 0;
  auto base = std::filesystem::temp_directory_path() /
              ("drover-cli-in-" + std::to_string(getpid()) + "-" + std::to_string(n++));
  std::string in = base.string() + ".in", out = base.string() + ".out",
              err = base.string() + ".err";
  std::ofstream(in) << input;
  CliResult r;
  r.exit_code = WaitExit(SpawnDrover(args, out, err, cwd, in));
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  for (const auto& p : {in, out, err}) std::filesystem::remove(p);
  return r;
}

}  // namespace drover::testing

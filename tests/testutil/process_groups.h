#pragma once
// Looking at process groups from tests: whether anything of a run is still alive.
#include <dirent.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace drover::testing {

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// True while some process of group `pgid` is alive (zombies do not count: in a container the
// init process may be slow to reap orphans, or never do it).
inline bool GroupHasLiveMember(int pgid) {
  if (kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR* d = opendir("/proc");
  bool live = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string stat = ReadWholeFile(std::string("/proc/") + e->d_name + "/stat");
    size_t rp = stat.rfind(')');
    if (rp == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (std::sscanf(stat.c_str() + rp + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') live = true;
  }
  closedir(d);
  return live;
}

// True while process `pid` is alive, a zombie not counting (as above).
inline bool ProcessAlive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::string stat = ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
  size_t rp = stat.rfind(')');
  if (rp == std::string::npos) return false;
  char state = 0;
  if (std::sscanf(stat.c_str() + rp + 1, " %c", &state) != 1) return false;
  return state != 'Z' && state != 'X';
}

// SIGKILL is asynchronous: give the members a moment to die (a bound, not a fixed sleep).
inline bool GroupGoneWithin(int pgid, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (GroupHasLiveMember(pgid)) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace drover::testing

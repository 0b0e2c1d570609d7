#pragma once
// For end-to-end tests that drive `drover mcp` over stdio: the input of a session (initialize,
// initialized, then one tools/call per entry, ids 1..n), and stopping the daemon it started for
// the store (it outlives `drover mcp` by design).
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "testutil/cli_runner.h"

namespace drover::testing {

// `calls`: {tool name, arguments}, answered with ids 1, 2, ...
inline std::string McpStdin(const std::vector<std::pair<std::string, nlohmann::json>>& calls) {
  using Json = nlohmann::json;
  std::string in =
      Json({{"jsonrpc", "2.0"},
            {"id", 0},
            {"method", "initialize"},
            {"params",
             {{"protocolVersion", "2025-06-18"},
              {"capabilities", Json::object()},
              {"clientInfo", {{"name", "e2e"}, {"version", "1"}}}}}})
          .dump() +
      "\n" + Json({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}).dump() + "\n";
  int id = 0;
  for (const auto& [tool, args] : calls) {
    in += Json({{"jsonrpc", "2.0"},
                {"id", ++id},
                {"method", "tools/call"},
                {"params", {{"name", tool}, {"arguments", args}}}})
              .dump() +
          "\n";
  }
  return in;
}

// SIGTERM to the daemon named in <store>/daemon.json, waited for up to 5 s.
// Starts `drover serve` on a free loopback port for `store` (its output in `dir`/serve.out|err)
// and returns its pid once its daemon.json names it (it then answers).
inline pid_t StartDaemon(const std::string& store, const std::string& dir,
                         std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"serve", "--listen", "127.0.0.1:0", "--store", store};
  args.insert(args.end(), extra.begin(), extra.end());
  pid_t pid = SpawnDrover(args, dir + "/serve.out", dir + "/serve.err");
  for (int i = 0; i < 400; ++i) {
    nlohmann::json j = nlohmann::json::parse(ReadFile(store + "/daemon.json"), nullptr, false);
    if (j.is_object() && j.value("pid", 0) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return pid;
}

inline void StopDaemonOf(const std::string& store) {
  nlohmann::json info = nlohmann::json::parse(ReadFile(store + "/daemon.json"), nullptr, false);
  if (!info.is_object() || info.value("pid", 0) <= 0) return;
  const int pid = info["pid"].get<int>();
  kill(pid, SIGTERM);
  for (int i = 0; i < 100 && kill(pid, 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace drover::testing

#pragma once
// Records each experiment's environment (the interpreter's package list, the GPUs and driver)
// off the engine's loop. Listing packages runs the user's interpreter, which may hang (a wedged
// network import, a broken site-packages): on its own thread, with a timeout, it costs that
// run's record a line ("timed out") and nothing else; the runs start meanwhile and the loop
// keeps answering.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/run.h"
#include "spec/yaml_fields.h"

namespace drover {

// The daemon config file's `environment:` section (config/daemon_config.h reads the file):
//
//   environment:
//     package_list_timeout: 30s   # the interpreter's package listing is killed after this
struct EnvironmentConfig {
  // The package listing runs the user's interpreter off the loop; past this it is killed and
  // recorded as timed out (the runs start meanwhile either way).
  Millis package_list_timeout_ms = 30'000;
};
const std::vector<std::string>& EnvironmentKeys();
Status ParseEnvironmentSection(const yaml::Reader& r, const yaml::Field& f, EnvironmentConfig* out);

struct EnvironmentRequest {
  int64_t experiment_id = 0;
  std::vector<std::string> interpreters;  // "" = not a Python run: no package list
  std::string workdir;                    // where the interpreter is started
  std::string hostname;
};

class EnvironmentCapture {
 public:
  // `describe_gpus` is called once, on the capture thread, the first time it is needed.
  EnvironmentCapture(std::function<std::string()> describe_gpus, Millis package_list_timeout_ms);
  // Waits for the capture in progress (each helper is bounded by the timeout).
  ~EnvironmentCapture();
  EnvironmentCapture(const EnvironmentCapture&) = delete;
  EnvironmentCapture& operator=(const EnvironmentCapture&) = delete;

  void Start(EnvironmentRequest request);
  // The environments captured since the last call (any thread; the engine's loop).
  std::vector<Environment> TakeFinished();
  // Whether a request is queued or being captured.
  bool Busy() const;
  // Blocks until every started request is captured.
  void WaitIdle();

 private:
  void Work();
  Environment Capture(const EnvironmentRequest& r, const std::string& interpreter);

  std::function<std::string()> describe_gpus_;
  Millis timeout_ms_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<EnvironmentRequest> queue_;
  std::vector<Environment> finished_;
  bool working_ = false;
  bool stop_ = false;
  bool described_ = false;
  std::string gpu_info_;
  std::thread thread_;  // started on the first request
};

}  // namespace drover

// The daemon's config reader (telemetry, alert sinks, detectors, scheduler, limits): any bytes as
// config.yaml.
#include <cstdint>
#include <string>

#include "config/daemon_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)drover::config::ParseDaemonConfig(text, "config.yaml");
  return 0;
}

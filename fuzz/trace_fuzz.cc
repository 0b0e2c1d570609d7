// The trace readers (Philly, openb pods and nodes) and the UTC time parser: any bytes as a trace
// file. The readers take a path, so the input is written to a file in /dev/shm first.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace drover::sim;
  static const std::string path = "/dev/shm/drover-fuzz-trace-" + std::to_string(getpid()) + ".csv";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  (void)ReadPhillyTrace(path);
  (void)ReadPhillyTrace(path, 1506816000, 1506902400);
  (void)ReadOpenbPods(path);
  (void)ReadOpenbNodes(path);
  std::string first(reinterpret_cast<const char*>(data), std::min<size_t>(size, 64));
  (void)ParseUtcTime(first.substr(0, first.find('\n')));
  return 0;
}

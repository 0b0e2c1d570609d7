#include "common/file_faults.h"

#include <atomic>
#include <cerrno>
#include <mutex>

namespace drover {
namespace {

std::atomic<bool> g_armed{false};
std::mutex g_mu;
FileFaults g_faults;  // under g_mu
std::atomic<int64_t> g_injected{0};

}  // namespace

void ArmFileFaults(const FileFaults& faults) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_faults = faults;
  g_armed.store(faults.error != 0);
}

void DisarmFileFaults() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_faults = FileFaults{};
  g_armed.store(false);
}

int64_t InjectedFileFaults() { return g_injected.load(); }

int FileFault(std::string_view path) {
  if (!g_armed.load(std::memory_order_relaxed)) return 0;
  std::lock_guard<std::mutex> lock(g_mu);
  FileFaults& f = g_faults;
  if (f.error == 0 || path.substr(0, f.under.size()) != f.under) return 0;
  if (f.after > 0) {
    --f.after;
    return 0;
  }
  if (f.count == 0) return 0;
  if (f.count > 0) --f.count;
  g_injected.fetch_add(1);
  errno = f.error;
  return f.error;
}

}  // namespace drover

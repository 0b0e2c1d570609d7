#include "sched/gpu_book.h"

namespace drover::sched {

void Take(GpuState& gpu, const StartAction& a) {
  gpu.reserved += a.gpu_memory;
  gpu.runs += 1;
  if (a.exclusive) gpu.exclusive = true;
}

void Give(GpuState& gpu, const StartAction& a) {
  gpu.reserved -= a.gpu_memory;
  gpu.runs -= 1;
  if (gpu.runs <= 0) {
    gpu.runs = 0;
    gpu.exclusive = false;
  }
}

GpuBook::GpuBook(std::vector<GpuState> gpus) : gpus_(std::move(gpus)) {
  for (size_t i = 0; i < gpus_.size(); ++i) position_[gpus_[i].index] = i;
}

void GpuBook::Apply(const StartAction& a, int cpus) {
  for (int index : a.gpus) {
    if (auto it = position_.find(index); it != position_.end()) Take(gpus_[it->second], a);
  }
  cpu_slots_used_ += cpus;
}

void GpuBook::Release(const StartAction& a, int cpus) {
  for (int index : a.gpus) {
    if (auto it = position_.find(index); it != position_.end()) Give(gpus_[it->second], a);
  }
  cpu_slots_used_ -= cpus;
}

}  // namespace drover::sched

// GPU health (docs/metrics.md, "GPU health"): each telemetry reading is evaluated per GPU (a MIG
// instance's health is its GPU's); a critical fault drains the GPU (all its MIG instances), which
// the drain book in the store folder keeps across restarts, and raises an alert, with a warning
// to each run on it, which is left alone; sustained throttling is a warning. Drained GPUs are
// left out of what the scheduler may start on (Schedule calls DropDrainedGpus), until an admin
// clears them (`drover gpu clear`, which edits the book; the engine reads it back within a
// second and says so in an alert).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/strings.h"
#include "engine/engine.h"
#include "engine/live.h"
#include "gpu/drain_book.h"
#include "gpu/health.h"

namespace drover {

struct GpuHealthWatch {
  std::string path;  // the drain book
  // The book as last read: its identity (a change renames a new file over it) and when to look
  // again.
  bool present = false;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  Millis next_look_mono = 0;
  std::string unreadable;  // the last error reading it, logged once
  std::map<std::string, DrainEntry> drained;    // by device key, as last read or written
  std::map<std::string, HealthMemory> memory;   // by the GPU's key (a MIG instance's GPU)
  std::map<std::string, HealthCounters> seen;   // what the book's "seen" holds
  HealthConfig config;
};

namespace {

constexpr Millis kDrainLookMs = 1000;  // how often the book is looked at for an admin's change

// How the book names a device: its UUID (a fake GPU's is stable), or its index when the driver
// gives none.
std::string DeviceKey(const GpuDevice& d) {
  return d.uuid.empty() ? fmt::format("index:{}", d.index) : d.uuid;
}

// ... and the GPU it is, or is a MIG instance of.
std::string GpuKey(const GpuDevice& d) {
  if (!IsMig(d)) return DeviceKey(d);
  return d.parent_uuid.empty() ? fmt::format("index:{}", d.parent_index) : d.parent_uuid;
}

std::string Ids(const std::vector<int64_t>& ids) {
  std::vector<std::string> s;
  for (int64_t id : ids) s.push_back(std::to_string(id));
  return Join(s, ", ");
}

// Whether the book has anything to keep of these counters (a GPU without ECC reports none).
bool Known(const HealthCounters& c) {
  return c.ecc_uncorrected >= 0 || c.pages_pending >= 0 || c.remap_failed >= 0;
}

}  // namespace

void Engine::DropDrainedGpus(std::vector<sched::GpuState>& gpus, Instant now) {
  if (gpus.empty()) return;
  RefreshDrains(now);
  if (health_->drained.empty()) return;
  std::set<int> drained;
  for (const GpuDevice& d : devices_) {
    if (health_->drained.count(DeviceKey(d))) drained.insert(d.index);
  }
  std::erase_if(gpus, [&](const sched::GpuState& g) { return drained.count(g.index) > 0; });
}

void Engine::RefreshDrains(Instant now) {
  const bool first = health_ == nullptr;
  if (first) {
    health_ = std::make_shared<GpuHealthWatch>();
    health_->path = DrainBookPath(options_.store_dir);
  }
  GpuHealthWatch& h = *health_;
  if (!first && now.mono < h.next_look_mono) return;
  h.next_look_mono = now.mono + kDrainLookMs;
  struct stat st {};
  const bool present = ::stat(h.path.c_str(), &st) == 0;
  const int64_t mtime_ns = present ? int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec
                                   : 0;
  if (!first && present == h.present &&
      (!present || (st.st_ino == h.ino && st.st_size == h.size && mtime_ns == h.mtime_ns))) {
    return;
  }
  Result<DrainBook> book = ReadDrainBook(h.path);
  if (!book.ok()) {
    // What was drained stays drained: a damaged book must not put a faulty GPU back to work.
    if (h.unreadable != book.status().message()) {
      spdlog::error("GPU drains: {}", book.status().message());
      h.unreadable = book.status().message();
    }
    return;
  }
  h.unreadable.clear();
  h.present = present;
  h.ino = present ? st.st_ino : 0;
  h.size = present ? st.st_size : 0;
  h.mtime_ns = mtime_ns;
  std::map<std::string, DrainEntry> read;
  for (const DrainEntry& e : book->drained) read[e.uuid] = e;
  for (const auto& [key, counters] : book->seen) {
    h.seen[key] = counters;
    HealthMemory& m = h.memory[key];
    if (!m.seen) m.seen = counters;
  }
  // What changed since: an admin's drain or clear (the engine's own drains are known already).
  auto index_of = [&](const std::string& key, int fallback) {
    for (const GpuDevice& d : devices_) {
      if (DeviceKey(d) == key) return d.index;
    }
    return fallback;
  };
  for (const auto& [key, e] : read) {
    if (h.drained.count(key)) continue;
    const int index = index_of(key, e.index);
    if (first) {
      spdlog::warn("GPU {} stays drained (by {}): {} `drover gpu clear {}` returns it", index,
                   e.by, e.reason, index);
      continue;
    }
    Alert a;
    a.kind = "gpu_drained";
    a.severity = "warning";
    a.key = fmt::format("gpu:{}:drain:admin", key);
    a.gpu = index;
    a.message = fmt::format(
        "GPU {} drained by {}{}: no new runs start on it; runs on it are left alone. `drover gpu "
        "clear {}` returns it.",
        index, e.by.empty() ? "an admin" : e.by, e.reason.empty() ? "" : " (" + e.reason + ")",
        index);
    a.data = {{"uuid", key}, {"by", e.by}, {"reason", e.reason}};
    RaiseAlert(std::move(a), now.wall);
  }
  for (const auto& [key, e] : h.drained) {
    if (read.count(key)) continue;
    const int index = index_of(key, e.index);
    auto c = book->cleared.find(key);
    const std::string by = c == book->cleared.end() || c->second.by.empty() ? "an admin"
                                                                            : c->second.by;
    Alert a;
    a.kind = "gpu_cleared";
    a.severity = "info";
    a.key = fmt::format("gpu:{}:cleared", key);
    a.gpu = index;
    a.message = fmt::format("GPU {} cleared by {}: new runs may start on it again.", index, by);
    a.data = {{"uuid", key}, {"by", by}, {"was", e.reason}};
    RaiseAlert(std::move(a), now.wall);
  }
  h.drained = std::move(read);
}

void Engine::CheckGpuHealth(const std::vector<GpuSample>& samples, Instant now) {
  RefreshDrains(now);
  GpuHealthWatch& h = *health_;
  // Each GPU once: a GPU in MIG mode is read through each of its instances, with the same health.
  struct Gpu {
    int physical = 0;
    const GpuSample* sample = nullptr;
    std::vector<const GpuDevice*> devices;
  };
  std::map<std::string, Gpu> gpus;
  std::vector<std::string> order;
  for (const GpuSample& s : samples) {
    auto d = std::find_if(devices_.begin(), devices_.end(),
                          [&](const GpuDevice& g) { return g.index == s.index; });
    if (d == devices_.end()) continue;
    const std::string key = GpuKey(*d);
    auto [it, inserted] = gpus.try_emplace(key);
    if (inserted) {
      it->second.physical = PhysicalIndex(*d);
      it->second.sample = &s;
      order.push_back(key);
    }
    it->second.devices.push_back(&*d);
  }
  std::vector<DrainEntry> new_drains;
  std::map<std::string, HealthCounters> new_seen;
  for (const std::string& key : order) {
    const Gpu& gpu = gpus.at(key);
    HealthMemory& memory = h.memory[key];
    std::vector<HealthFinding> findings = EvaluateHealth(*gpu.sample, memory, h.config);
    if (memory.seen && Known(*memory.seen) &&
        (!h.seen.count(key) || h.seen.at(key) != *memory.seen)) {
      new_seen[key] = *memory.seen;
    }
    if (findings.empty()) continue;
    std::vector<int> mig;
    std::set<int> indices;
    for (const GpuDevice* d : gpu.devices) {
      indices.insert(d->index);
      if (IsMig(*d)) mig.push_back(d->index);
    }
    std::sort(mig.begin(), mig.end());
    const std::string label = GpuLabel(gpu.physical, mig);
    // The runs on it now: left alone, and told.
    std::vector<Live*> on;
    for (int64_t id : queue_.running()) {
      auto found = live_.find(id);
      if (found == live_.end()) continue;
      for (int g : found->second->placement.gpus) {
        if (indices.count(g)) {
          on.push_back(found->second.get());
          break;
        }
      }
    }
    std::vector<int64_t> run_ids;
    for (const Live* l : on) run_ids.push_back(l->run.id);
    for (const HealthFinding& f : findings) {
      Alert a;
      a.kind = f.kind;
      a.severity = f.severity;
      a.key = fmt::format("gpu:{}:{}", key, f.key);
      a.gpu = gpu.physical;
      a.data = f.data;
      a.data["gpus"] = std::vector<int>(indices.begin(), indices.end());
      a.data["runs"] = run_ids;
      if (!f.drain) {
        a.message = label + " " + f.what +
                    (run_ids.empty() ? "" : fmt::format(" (on it: run {})", Ids(run_ids)));
        RaiseAlert(std::move(a), now.wall);
        continue;
      }
      a.message = DrainMessage(label, f.what, run_ids, gpu.physical);
      a.data["drained"] = true;
      for (const GpuDevice* d : gpu.devices) {
        const std::string dk = DeviceKey(*d);
        if (h.drained.count(dk)) continue;
        DrainEntry e{dk, d->index, a.message, kDrainedByDrover, now.wall, f.key};
        h.drained[dk] = e;
        new_drains.push_back(std::move(e));
      }
      RaiseAlert(std::move(a), now.wall);  // the log sink says it too
      for (const Live* l : on) {
        Alert r;
        r.kind = "gpu_drained";
        r.severity = "warning";
        r.key = fmt::format("run:{}:gpu_drained:{}", l->run.id, key);
        r.experiment_id = l->run.experiment_id;
        r.run_id = l->run.id;
        r.gpu = gpu.physical;
        r.message = fmt::format(
            "run {} is on {}, which {}: it goes on, but check its results (a GPU fault can "
            "corrupt them, or stop the run); no new run starts on that GPU until an admin clears "
            "it",
            l->run.id, label, f.what);
        r.data = f.data;
        if (l->attempt) r.data["attempt"] = l->attempt->number;
        RaiseAlert(std::move(r), now.wall);
      }
    }
  }
  if (new_drains.empty() && new_seen.empty()) return;
  Status st = UpdateDrainBook(h.path, [&](DrainBook& book) {
    for (const DrainEntry& e : new_drains) {
      if (book.Find(e.uuid) == nullptr) book.drained.push_back(e);
    }
    for (const auto& [key, counters] : new_seen) book.seen[key] = counters;
    return Status::Ok();
  });
  if (st.ok()) {
    for (const auto& [key, counters] : new_seen) h.seen[key] = counters;
  } else {
    // Drained in this engine all the same; a restart would forget it.
    spdlog::error("GPU drains could not be written to {}: {}", h.path, st.message());
  }
}

}  // namespace drover

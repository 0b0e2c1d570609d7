// GPU health (docs/metrics.md, "GPU health"): each telemetry reading is evaluated per GPU (a MIG
// instance's health is its GPU's); a critical fault drains the GPU (all its MIG instances), which
// the drain book in the store folder keeps across restarts, and raises an alert, with a warning
// to each run on it, which is left alone; sustained throttling is a warning. Drained GPUs are
// left out of what the scheduler may start on (the engine asks for Drained at each scheduling
// pass), until an admin clears them (`drover gpu clear`, which edits the book; the engine reads it
// back within a second and says so in an alert).
#include "engine/health_watch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/strings.h"
#include "gpu/drain_book.h"
#include "gpu/health.h"

namespace drover {

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

std::set<int> HealthWatch::Drained(const std::vector<GpuDevice>& devices, Instant now) {
  Refresh(devices, now);
  std::set<int> drained;
  for (const GpuDevice& d : devices) {
    if (drained_.count(DeviceKey(d))) drained.insert(d.index);
  }
  return drained;
}

void HealthWatch::Refresh(const std::vector<GpuDevice>& devices, Instant now) {
  const bool first = !looked_;
  looked_ = true;
  Book& h = book_;
  if (!first && now.mono < h.next_look_mono) return;
  h.next_look_mono = now.mono + kDrainLookMs;
  struct stat st {};
  const bool present = ::stat(h.path.c_str(), &st) == 0;
  const int64_t mtime_ns =
      present ? int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec : 0;
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
    seen_[key] = counters;
    HealthMemory& m = memory_[key];
    if (!m.seen) m.seen = counters;
  }
  // What changed since: an admin's drain or clear (the engine's own drains are known already).
  auto index_of = [&](const std::string& key, int fallback) {
    for (const GpuDevice& d : devices) {
      if (DeviceKey(d) == key) return d.index;
    }
    return fallback;
  };
  for (const auto& [key, e] : read) {
    if (drained_.count(key)) continue;
    const int index = index_of(key, e.index);
    if (first) {
      spdlog::warn("GPU {} stays drained (by {}): {} `drover gpu clear {}` returns it", index, e.by,
                   e.reason, index);
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
    ctx_.Alert(std::move(a), now.wall);
  }
  for (const auto& [key, e] : drained_) {
    if (read.count(key)) continue;
    const int index = index_of(key, e.index);
    auto c = book->cleared.find(key);
    const std::string by =
        c == book->cleared.end() || c->second.by.empty() ? "an admin" : c->second.by;
    Alert a;
    a.kind = "gpu_cleared";
    a.severity = "info";
    a.key = fmt::format("gpu:{}:cleared", key);
    a.gpu = index;
    a.message = fmt::format("GPU {} cleared by {}: new runs may start on it again.", index, by);
    a.data = {{"uuid", key}, {"by", by}, {"was", e.reason}};
    ctx_.Alert(std::move(a), now.wall);
  }
  drained_ = std::move(read);
}

void HealthWatch::Check(const std::vector<GpuSample>& samples,
                        const std::vector<GpuDevice>& devices,
                        const std::map<int, std::vector<RunOnGpu>>& holders, Instant now) {
  Refresh(devices, now);
  Book& h = book_;
  // Each GPU once: a GPU in MIG mode is read through each of its instances, with the same health.
  struct Gpu {
    int physical = 0;
    const GpuSample* sample = nullptr;
    std::vector<const GpuDevice*> devices;
  };
  std::map<std::string, Gpu> gpus;
  std::vector<std::string> order;
  for (const GpuSample& s : samples) {
    auto d = std::find_if(devices.begin(), devices.end(),
                          [&](const GpuDevice& g) { return g.index == s.index; });
    if (d == devices.end()) continue;
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
    HealthMemory& memory = memory_[key];
    std::vector<HealthFinding> findings = EvaluateHealth(*gpu.sample, memory, config_);
    if (memory.seen && Known(*memory.seen) &&
        (!seen_.count(key) || seen_.at(key) != *memory.seen)) {
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
    std::vector<RunOnGpu> on;
    std::set<int64_t> counted;
    for (int g : indices) {
      auto held = holders.find(g);
      if (held == holders.end()) continue;
      for (const RunOnGpu& r : held->second) {
        if (counted.insert(r.run_id).second) on.push_back(r);
      }
    }
    std::vector<int64_t> run_ids;
    for (const RunOnGpu& r : on) run_ids.push_back(r.run_id);
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
        ctx_.Alert(std::move(a), now.wall);
        continue;
      }
      a.message = DrainMessage(label, f.what, run_ids, gpu.physical);
      a.data["drained"] = true;
      for (const GpuDevice* d : gpu.devices) {
        const std::string dk = DeviceKey(*d);
        if (drained_.count(dk)) continue;
        DrainEntry e{dk, d->index, a.message, kDrainedByDrover, now.wall, f.key};
        drained_[dk] = e;
        new_drains.push_back(std::move(e));
      }
      ctx_.Alert(std::move(a), now.wall);  // the log sink says it too
      for (const RunOnGpu& l : on) {
        Alert r;
        r.kind = "gpu_drained";
        r.severity = "warning";
        r.key = fmt::format("run:{}:gpu_drained:{}", l.run_id, key);
        r.experiment_id = l.experiment_id;
        r.run_id = l.run_id;
        r.gpu = gpu.physical;
        r.message = fmt::format(
            "run {} is on {}, which {}: it goes on, but check its results (a GPU fault can "
            "corrupt them, or stop the run); no new run starts on that GPU until an admin clears "
            "it",
            l.run_id, label, f.what);
        r.data = f.data;
        if (l.attempt > 0) r.data["attempt"] = l.attempt;
        ctx_.Alert(std::move(r), now.wall);
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
    for (const auto& [key, counters] : new_seen) seen_[key] = counters;
  } else {
    // Drained in this engine all the same; a restart would forget it.
    spdlog::error("GPU drains could not be written to {}: {}", h.path, st.message());
  }
}

}  // namespace drover

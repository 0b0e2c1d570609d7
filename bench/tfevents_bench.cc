// TensorBoard ingestion speed (bench/README.md, "TensorBoard ingestion"): drover's event file
// reader (src/tfevents/) against drover's own JSON-lines metric reader over the same points, one
// core, the files on the real disk (default build/bench-tmp; a path argument names another).
//   cmake --build build --target tfevents_bench && build/tfevents_bench [FOLDER] [COPIES]
// The event file is the CatBoost fixture (1,000 records of one scalar) repeated COPIES times
// (default 2,000: 2 million points, 110 MB); the JSON file holds the same points as drover.log
// lines ({"step": N, "Logloss": V}). Each is read whole 5 times after one warm-up read (the page
// cache holds both: this measures decoding, as a daemon reading what a run just wrote does).
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "metrics/metric_lines.h"
#include "store/store.h"
#include "tfevents/reader.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const fs::path dir = argc > 1 ? fs::path(argv[1]) : fs::path("build/bench-tmp");
  const int copies = argc > 2 ? std::atoi(argv[2]) : 2000;
  fs::create_directories(dir);
  const std::string fixture =
      std::string(DROVER_SOURCE_DIR) + "/tests/data/tfevents/catboost/events.out.tfevents";
  std::ifstream in(fixture, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string one = ss.str();
  const fs::path events = dir / "events.out.tfevents.bench";
  const fs::path lines = dir / "metrics.jsonl";
  {
    std::ofstream out(events, std::ios::binary | std::ios::trunc);
    for (int i = 0; i < copies; ++i) out << one;
  }
  // The same points as JSON lines, from a first read of the event file.
  int64_t points = 0;
  {
    int fd = open(events.c_str(), O_RDONLY);
    std::ofstream out(lines, std::ios::trunc);
    int64_t offset = 0, step = 0;
    while (true) {
      auto r = drover::tfevents::ReadScalars(fd, offset, true, [&](const drover::tfevents::Scalar& s) {
        out << fmt::format("{{\"step\": {}, \"{}\": {}}}\n", step++, s.tag, s.value);
        ++points;
      });
      if (!r.ok() || r->offset == offset) break;
      offset = r->offset;
    }
    close(fd);
  }
  auto time_events = [&] {
    int fd = open(events.c_str(), O_RDONLY);
    int64_t n = 0, offset = 0;
    double sum = 0;
    auto t0 = Clock::now();
    while (true) {
      auto r = drover::tfevents::ReadScalars(fd, offset, true, [&](const drover::tfevents::Scalar& s) {
        ++n;
        sum += s.value;
      });
      if (!r.ok() || r->offset == offset) break;
      offset = r->offset;
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    close(fd);
    if (n != points || sum == 0) std::abort();
    return secs;
  };
  auto time_lines = [&] {
    int64_t n = 0, offset = 0;
    double sum = 0;
    auto t0 = Clock::now();
    while (true) {
      auto r = drover::ReadNewLines(lines.string(), offset, true, [&](std::string_view line) {
        auto m = drover::ParseMetricLine(line, 0);
        if (!m) return;
        for (auto& [k, v] : m->values) {
          ++n;
          sum += v;
        }
      }, drover::kEngineLineLimits);
      if (!r.ok() || *r == offset) break;
      offset = *r;
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (n != points || sum == 0) std::abort();
    return secs;
  };
  // Ingestion as the engine does it: read, then the points stored in SQLite (a file store in the
  // same folder), a transaction per read of up to 8 MiB.
  auto time_ingest = [&] {
    fs::remove(dir / "bench.db");
    fs::remove(dir / "bench.db-wal");
    fs::remove(dir / "bench.db-shm");
    auto store = drover::Store::Open((dir / "bench.db").string());
    if (!store.ok()) std::abort();
    // The records the points belong to (an experiment, a run, an attempt), as the engine has.
    drover::Experiment e;
    e.name = "bench";
    e.spec = drover::Json::object();
    e.status = "active";
    drover::Run run;
    drover::Attempt a;
    if (!(*store)->InsertExperiment(e).ok()) std::abort();
    run.experiment_id = e.id;
    if (!(*store)->InsertRun(run).ok()) std::abort();
    a.run_id = run.id;
    a.number = 1;
    if (!(*store)->InsertAttempt(a).ok()) std::abort();
    
    int fd = open(events.c_str(), O_RDONLY);
    int64_t n = 0, offset = 0;
    auto t0 = Clock::now();
    while (true) {
      std::vector<drover::MetricPoint> batch;
      auto r = drover::tfevents::ReadScalars(fd, offset, true, [&](const drover::tfevents::Scalar& s) {
        drover::MetricPoint p;
        p.run_id = run.id;
        p.attempt_id = a.id;
        p.step = s.step;
        p.name = std::string(s.tag);
        p.value = s.value;
        p.t_ms = static_cast<int64_t>(s.wall_time * 1000);
        batch.push_back(std::move(p));
      });
      if (!r.ok() || r->offset == offset) break;
      offset = r->offset;
      n += static_cast<int64_t>(batch.size());
      if (!(*store)->Begin().ok() || !(*store)->InsertMetrics(batch).ok() ||
          !(*store)->Commit().ok()) {
        std::abort();
      }
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    close(fd);
    if (n != points) std::abort();
    return secs;
  };
  time_events();
  time_lines();
  std::vector<double> ev, jl;
  for (int i = 0; i < 5; ++i) {
    ev.push_back(time_events());
    jl.push_back(time_lines());
  }
  std::vector<double> ingest;
  for (int i = 0; i < 3; ++i) ingest.push_back(time_ingest());
  std::sort(ingest.begin(), ingest.end());
  std::sort(ev.begin(), ev.end());
  std::sort(jl.begin(), jl.end());
  const double ev_rate = points / ev[2], jl_rate = points / jl[2];
  fmt::print("points: {} ({} MB of events, {} MB of JSON lines) in {}\n", points,
             fs::file_size(events) >> 20, fs::file_size(lines) >> 20, dir.string());
  fmt::print("event files (drover tfevents): median {:.3f} s = {:.2f} M points/s\n", ev[2],
             ev_rate / 1e6);
  fmt::print("JSON lines (drover stdout reader): median {:.3f} s = {:.2f} M points/s\n", jl[2],
             jl_rate / 1e6);
  fmt::print("ratio (events / JSON lines): {:.2f}x\n", ev_rate / jl_rate);
  fmt::print("read and stored in SQLite (the engine's ingestion): median {:.3f} s = {:.2f} M "
             "points/s\n",
             ingest[1], points / ingest[1] / 1e6);
  fs::remove(dir / "bench.db");
  fs::remove(dir / "bench.db-wal");
  fs::remove(dir / "bench.db-shm");
  fs::remove(events);
  fs::remove(lines);
  return ev_rate >= 1e6 ? 0 : 1;
}

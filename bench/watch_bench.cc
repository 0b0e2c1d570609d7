// Two measurements for bench/watch.sh (see bench/README.md):
//   watch_bench detectors [POINTS]        points/s one core checks: the spike detector alone, and
//                                         a run's whole RunWatch on a loss metric and on the
//                                         allocator numbers the Python client logs
//   watch_bench raw-sqlite DB RUNS LINES  the raw SQLite insert rate of the rows the daemon stores
//                                         for RUNS runs of LINES lines (two metrics a line): one
//                                         prepared INSERT, 10,000 rows per transaction, the
//                                         store's schema and pragmas (WAL, synchronous=NORMAL)
// Each prints one JSON line.
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "spec/spec_parser.h"
#include "store/store.h"
#include "watch/run_watch.h"

namespace {

using namespace drover;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Detectors(long points) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.02);
  std::vector<double> losses(4096);
  for (size_t i = 0; i < losses.size(); ++i) losses[i] = 1.0 / (1 + i * 0.01) + noise(rng);

  watch::DetectorConfig config;
  auto t0 = std::chrono::steady_clock::now();
  watch::SpikeDetector spike("loss", config);
  long found = 0;
  for (long i = 0; i < points; ++i) found += spike.Add(i, losses[i % losses.size()]).has_value();
  double spike_rate = points / Seconds(t0);

  auto spec = ParseSpecString("name: b\ncommand: python train.py\n"
                              "objective: {metric: loss, mode: min}\n",
                              "bench.yaml", ".");
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  watch::RunWatch run(*spec, config);
  MetricPoint p;
  p.name = "loss";
  t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < points; ++i) {
    p.step = i;
    p.value = losses[i % losses.size()];
    found += run.OnPoint(p).size();
  }
  double run_rate = points / Seconds(t0);

  // The allocator triple, as TrainingMonitor logs it: three points a line.
  watch::RunWatch alloc(*spec, config);
  const char* names[] = {"cuda_allocated_bytes", "cuda_fragmentation", "cuda_reserved_bytes"};
  t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < points; ++i) {
    p.step = i / 3;
    p.name = names[i % 3];
    p.t_ms = i;
    // A healthy run: allocated breathes by up to 50 MB a step, 10% of the pool is slack.
    double allocated = 4e9 + 1e6 * ((i / 3) % 50);
    double reserved = 4.4e9 + 5e7;
    p.value = i % 3 == 0 ? allocated : i % 3 == 2 ? reserved : (reserved - allocated) / reserved;
    found += alloc.OnPoint(p).size();
  }
  double alloc_rate = points / Seconds(t0);
  std::printf(
      "{\"points\": %ld, \"spike_points_per_s\": %.0f, \"run_watch_loss_points_per_s\": %.0f, "
      "\"run_watch_allocator_points_per_s\": %.0f, \"findings\": %ld}\n",
      points, spike_rate, run_rate, alloc_rate, found);
  return 0;
}

int RawSqlite(const std::string& path, long runs, long lines) {
  {
    // The store's schema, made by the store itself.
    auto store = Store::Open(path);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      return 1;
    }
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return 1;
  sqlite3_exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;", nullptr, nullptr,
               nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db,
                     "INSERT INTO metrics (run_id, attempt_id, step, name, value, t_ms) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     -1, &st, nullptr);
  const long rows = runs * lines * 2;
  auto t0 = std::chrono::steady_clock::now();
  long in_tx = 0;
  sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
  for (long line = 0; line < lines; ++line) {
    for (long run = 1; run <= runs; ++run) {
      for (int m = 0; m < 2; ++m) {
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, run);
        sqlite3_bind_int64(st, 3, line);
        sqlite3_bind_text(st, 4, m == 0 ? "loss" : "acc", -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 5, m == 0 ? 1.0 / (line + 1) : line * 1e-6);
        sqlite3_bind_int64(st, 6, 1'800'000'000'000 + line);
        if (sqlite3_step(st) != SQLITE_DONE) {
          std::fprintf(stderr, "insert: %s\n", sqlite3_errmsg(db));
          return 1;
        }
        sqlite3_reset(st);
        if (++in_tx == 10'000) {
          sqlite3_exec(db, "COMMIT; BEGIN", nullptr, nullptr, nullptr);
          in_tx = 0;
        }
      }
    }
  }
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  double s = Seconds(t0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  std::printf("{\"rows\": %ld, \"seconds\": %.3f, \"rows_per_s\": %.0f}\n", rows, s, rows / s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "detectors") return Detectors(argc > 2 ? std::atol(argv[2]) : 2'000'000);
  if (mode == "raw-sqlite" && argc == 5) {
    return RawSqlite(argv[2], std::atol(argv[3]), std::atol(argv[4]));
  }
  std::fprintf(stderr,
               "usage: watch_bench detectors [POINTS]\n"
               "       watch_bench raw-sqlite DB RUNS LINES\n");
  return 2;
}

// web_fixture STORE_DIR RUNS POINTS: fills a store for bench/web_render.sh (bench/README.md):
// experiment "sweep" with RUNS finished runs (three parameters, final metrics, 20 points of
// val_acc and loss each, a few failed with reasons), and experiment "long" with one run whose
// loss has POINTS points. Prints one JSON line with the ids.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "model/spec.h"
#include "store/store.h"

namespace {

using namespace drover;

int Fail(const Status& st) {
  std::fprintf(stderr, "web_fixture: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: web_fixture STORE_DIR RUNS POINTS\n");
    return 2;
  }
  std::string dir = argv[1];
  long runs = std::atol(argv[2]);
  long points = std::atol(argv[3]);
  std::filesystem::create_directories(dir);
  auto opened = Store::Open(dir + "/drover.db");
  if (!opened.ok()) return Fail(opened.status());
  Store& store = **opened;
  const Millis t0 = 1'764'460'800'000;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0, 1);

  if (Status st = store.Begin(); !st.ok()) return Fail(st);
  Experiment sweep;
  sweep.name = "sweep";
  // Specs as the engine stores them (it reads them back when it starts).
  Spec spec;
  spec.name = "sweep";
  spec.command = {"python3", "train.py"};
  spec.workdir = dir;
  spec.params = {{"lr", {0.1, 0.01}}, {"batch_size", {32, 64}}, {"model", {"mlp", "cnn"}}};
  spec.objective = Objective{"val_acc", true};
  sweep.spec = SpecToJson(spec);
  sweep.spec_yaml = "name: sweep\n";
  sweep.created_ms = t0;
  sweep.status = "done";
  if (Status st = store.InsertExperiment(sweep); !st.ok()) return Fail(st);
  const char* models[] = {"mlp", "cnn", "resnet50", "efficientnet"};
  std::vector<MetricPoint> batch;
  for (long i = 0; i < runs; ++i) {
    Run r;
    r.experiment_id = sweep.id;
    r.index = static_cast<int>(i);
    double lr = std::pow(10.0, -1 - 3 * u(rng));
    int bs = 16 << (i % 5);
    r.params = {{"lr", lr}, {"batch_size", bs}, {"model", models[i % 4]}};
    r.current_params = r.params;
    r.fingerprint = "fp" + std::to_string(i);
    bool failed = i % 23 == 0;
    r.state = failed ? RunState::kFailed : RunState::kSucceeded;
    r.reason = failed ? (i % 2 ? "cuda_oom" : "diverged") : "succeeded";
    r.attempts = failed ? 3 : 1;
    r.created_ms = t0 + i;
    r.started_ms = t0 + 1000 + i * 10;
    r.ended_ms = r.started_ms + 60'000 + static_cast<Millis>(u(rng) * 600'000);
    double acc = 0.7 + 0.29 * u(rng);
    r.final_metrics = {{"val_acc", acc}, {"loss", 1 - acc}};
    if (Status st = store.InsertRun(r); !st.ok()) return Fail(st);
    for (int s = 0; s < 20; ++s) {
      double f = (s + 1) / 20.0;
      batch.push_back({r.id, 0, s, "val_acc", acc * f, r.started_ms + s * 1000});
      batch.push_back({r.id, 0, s, "loss", 1 - acc * f, r.started_ms + s * 1000});
    }
    if (batch.size() > 20'000) {
      if (Status st = store.InsertMetrics(batch); !st.ok()) return Fail(st);
      batch.clear();
    }
  }
  if (Status st = store.InsertMetrics(batch); !st.ok()) return Fail(st);
  batch.clear();

  Experiment long_exp;
  long_exp.name = "long";
  spec.name = "long";
  spec.params = {{"lr", 0.001}};
  spec.objective.reset();
  long_exp.spec = SpecToJson(spec);
  long_exp.status = "done";
  long_exp.spec_yaml = "name: long\n";
  long_exp.created_ms = t0;
  if (Status st = store.InsertExperiment(long_exp); !st.ok()) return Fail(st);
  Run r;
  r.experiment_id = long_exp.id;
  r.params = {{"lr", 0.001}};
  r.current_params = r.params;
  r.fingerprint = "long";
  r.state = RunState::kSucceeded;
  r.reason = "succeeded";
  r.attempts = 1;
  r.created_ms = t0;
  r.started_ms = t0 + 1000;
  r.ended_ms = t0 + 3'600'000;
  if (Status st = store.InsertRun(r); !st.ok()) return Fail(st);
  Attempt a;
  a.run_id = r.id;
  a.number = 1;
  a.ended = true;
  a.reason = "succeeded";
  a.exit_code = 0;
  a.argv = {"python3", "train.py"};
  a.started_ms = r.started_ms;
  a.ended_ms = r.ended_ms;
  a.stdout_path = dir + "/long-stdout";
  a.stderr_path = dir + "/long-stderr";
  if (Status st = store.InsertAttempt(a); !st.ok()) return Fail(st);
  {
    std::FILE* out = std::fopen(a.stdout_path.c_str(), "w");
    if (out != nullptr) {
      for (int i = 0; i < 100; ++i) std::fprintf(out, "{\"step\": %d, \"loss\": 1.0}\n", i);
      std::fclose(out);
    }
    std::fclose(std::fopen(a.stderr_path.c_str(), "w"));
  }
  std::normal_distribution<double> noise(0, 0.02);
  double last = 0;
  for (long s = 0; s < points; ++s) {
    last = 2.0 / (1 + s * 1e-4) + noise(rng);
    batch.push_back({r.id, a.id, s, "loss", last, r.started_ms + s});
    if (batch.size() >= 50'000) {
      if (Status st = store.InsertMetrics(batch); !st.ok()) return Fail(st);
      batch.clear();
    }
  }
  if (Status st = store.InsertMetrics(batch); !st.ok()) return Fail(st);
  r.final_metrics = {{"loss", last}};
  if (Status st = store.UpdateRun(r); !st.ok()) return Fail(st);
  if (Status st = store.Commit(); !st.ok()) return Fail(st);
  std::printf("{\"sweep_experiment\": %lld, \"runs\": %ld, \"long_run\": %lld, \"points\": %ld}\n",
              static_cast<long long>(sweep.id), runs, static_cast<long long>(r.id), points);
  return 0;
}

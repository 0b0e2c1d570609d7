// GET /metrics: drover for Prometheus (docs/metrics.md lists every family). GPU gauges come from
// the engine's latest telemetry; run, queue, alert and failure numbers from the store, so they
// survive a restart of the daemon.
#include "server/prometheus.h"
#include "server/routes.h"

namespace drover::server {
namespace {

// Queue wait buckets: seconds to days, where GPU queues live.
const std::vector<double> kWaitBuckets = {1,    5,    15,    30,    60,    300,   900,
                                          1800, 3600, 10800, 21600, 43200, 86400, 259200};

Status PrometheusText(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(StoreTotals totals, store->Totals(kWaitBuckets));
  std::vector<protocol::GpuStatus> gpus = ctx.engine.Gpus();

  PromWriter w;
  auto gpu_family = [&](const char* name, const char* help, auto value) {
    w.Family(name, "gauge", help);
    for (const auto& g : gpus) {
      double v = value(g);
      if (v < 0) continue;  // unknown on this GPU: no sample rather than a made-up one
      w.Sample(name, {{"gpu", std::to_string(g.index)}, {"uuid", g.uuid}, {"name", g.name}}, v);
    }
  };
  auto tele = [](const protocol::GpuStatus& g, double GpuSample::*field) {
    return g.telemetry ? (*g.telemetry).*field : -1.0;
  };
  gpu_family("drover_gpu_utilization_ratio", "SM utilisation of the GPU, 0 to 1.",
             [&](const auto& g) {
               double u = tele(g, &GpuSample::utilization);
               return u < 0 ? -1.0 : u / 100.0;
             });
  gpu_family("drover_gpu_memory_used_bytes", "GPU memory in use, as the driver reports it.",
             [](const auto& g) {
               return g.telemetry && g.telemetry->memory_used >= 0
                          ? static_cast<double>(g.telemetry->memory_used)
                          : -1.0;
             });
  gpu_family("drover_gpu_memory_total_bytes", "GPU memory drover may hand out.",
             [](const auto& g) { return static_cast<double>(g.memory_total); });
  gpu_family("drover_gpu_memory_reserved_bytes",
             "GPU memory reserved by drover's running runs (their declared gpu_memory).",
             [](const auto& g) { return static_cast<double>(g.memory_reserved); });
  gpu_family("drover_gpu_temperature_celsius", "GPU temperature.",
             [&](const auto& g) { return tele(g, &GpuSample::temperature_c); });
  gpu_family("drover_gpu_power_watts", "GPU power draw.",
             [&](const auto& g) { return tele(g, &GpuSample::power_w); });
  gpu_family("drover_gpu_pcie_tx_bytes_per_second", "PCIe transmit throughput of the GPU.",
             [&](const auto& g) { return tele(g, &GpuSample::pcie_tx_bytes_per_s); });
  gpu_family("drover_gpu_pcie_rx_bytes_per_second", "PCIe receive throughput of the GPU.",
             [&](const auto& g) { return tele(g, &GpuSample::pcie_rx_bytes_per_s); });
  gpu_family("drover_gpu_runs", "Runs drover has running on the GPU.",
             [](const auto& g) { return static_cast<double>(g.runs.size()); });

  auto count = [&](RunState s) {
    auto it = totals.runs_by_state.find(std::string(ToString(s)));
    return it == totals.runs_by_state.end() ? 0.0 : static_cast<double>(it->second);
  };
  // Every state is listed, from the state enum itself, with 0 when none: a series that
  // disappears confuses rate() and alerts.
  w.Family("drover_runs", "gauge", "Runs in the store by state.");
  for (RunState s : kAllRunStates) {
    w.Sample("drover_runs", {{"state", std::string(ToString(s))}}, count(s));
  }
  w.Family("drover_queue_length", "gauge",
           "Runs waiting to start: queued, or waiting out a retry backoff.");
  w.Sample("drover_queue_length", {}, count(RunState::kQueued) + count(RunState::kRetrying));

  w.Family("drover_queue_wait_seconds", "histogram",
           "Time from submit to a run's first start, for runs that started.");
  for (size_t i = 0; i < totals.wait_bounds_s.size(); ++i) {
    w.Sample("drover_queue_wait_seconds_bucket", {{"le", FormatPromValue(totals.wait_bounds_s[i])}},
             static_cast<double>(totals.wait_cumulative[i]));
  }
  w.Sample("drover_queue_wait_seconds_bucket", {{"le", "+Inf"}},
           static_cast<double>(totals.wait_count));
  w.Sample("drover_queue_wait_seconds_sum", {}, totals.wait_sum_s);
  w.Sample("drover_queue_wait_seconds_count", {}, static_cast<double>(totals.wait_count));

  w.Family("drover_alerts_total", "counter",
           "Alerts raised and notified, by kind (repeats within the silence window not counted).");
  for (const auto& [kind, n] : totals.alerts_by_kind) {
    w.Sample("drover_alerts_total", {{"kind", kind}}, static_cast<double>(n));
  }
  w.Family("drover_attempt_failures_total", "counter",
           "Attempts that ended without success, by reason (cuda_oom, exit_code, timeout, ...).");
  for (const auto& [reason, n] : totals.attempt_failures_by_reason) {
    w.Sample("drover_attempt_failures_total", {{"reason", reason}}, static_cast<double>(n));
  }
  res.set_content(w.text(), "text/plain; version=0.0.4; charset=utf-8");
  return Status::Ok();
}

}  // namespace

void RegisterPrometheusRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get("/metrics", Route(ctx, PrometheusText));
}

}  // namespace drover::server

// The watchers' records: alerts and GPU telemetry samples; and the totals /metrics reports.
#include <fmt/format.h>

#include "store/sqlite_stmt.h"
#include "store/store.h"

namespace drover {

namespace {

using store::DumpJson;
using store::ParseJson;
using store::Stmt;

#define DROVER_ALERT_COLS                                                                       \
  "id, kind, severity, key, message, experiment_id, run_id, gpu, data, first_ms, last_ms, " \
  "count"
#define DROVER_GPU_SAMPLE_COLS                                                                 \
  "gpu, t_ms, utilization, memory_used, memory_total, temperature_c, power_w, pcie_tx, " \
  "pcie_rx"

Status ReadAlert(const Stmt& st, Alert* a) {
  a->id = st.Int(0);
  a->kind = st.Text(1);
  a->severity = st.Text(2);
  a->key = st.Text(3);
  a->message = st.Text(4);
  a->experiment_id = st.Int(5);
  a->run_id = st.Int(6);
  a->gpu = static_cast<int>(st.Int(7));
  DROVER_RETURN_IF_ERROR(ParseJson(st.Text(8), fmt::format("alert {} data", a->id), &a->data));
  a->first_ms = st.Int(9);
  a->last_ms = st.Int(10);
  a->count = st.Int(11);
  return Status::Ok();
}

// Unknown telemetry (negative) is NULL in the table; NULL reads back as NaN, returned as -1.
double Known(double v) { return v < 0 ? std::numeric_limits<double>::quiet_NaN() : v; }
double Unknown(double v) { return std::isnan(v) ? -1 : v; }

}  // namespace

Status Store::InsertAlert(Alert& a) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("INSERT INTO alerts (kind, severity, key, message, experiment_id, "
                          "run_id, gpu, data, first_ms, last_ms, count) VALUES "
                          "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          "storing an alert"));
  st.Bind(a.kind, a.severity, a.key, a.message, a.experiment_id, a.run_id, a.gpu,
          DumpJson(a.data), a.first_ms, a.last_ms, a.count);
  DROVER_RETURN_IF_ERROR(st.Run());
  a.id = sqlite3_last_insert_rowid(impl_->db);
  return Status::Ok();
}

Status Store::UpdateAlert(const Alert& a) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("UPDATE alerts SET message = ?, data = ?, last_ms = ?, count = ? "
                          "WHERE id = ?",
                          "updating an alert"));
  st.Bind(a.message, DumpJson(a.data), a.last_ms, a.count, a.id);
  DROVER_RETURN_IF_ERROR(st.Run());
  return impl_->ExpectChanged("alert", a.id);
}

Result<std::optional<Alert>> Store::LatestAlert(const std::string& key) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT " DROVER_ALERT_COLS
                          " FROM alerts WHERE key = ? ORDER BY id DESC LIMIT 1",
                          "reading an alert"));
  st.Bind(key);
  DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<Alert>();
  Alert a;
  DROVER_RETURN_IF_ERROR(ReadAlert(st, &a));
  return std::optional<Alert>(std::move(a));
}

Result<std::vector<Alert>> Store::ListAlerts(const AlertFilter& filter) {
  // One SQL text per filter shape, each cached like the fixed statements.
  std::string sql = "SELECT " DROVER_ALERT_COLS " FROM alerts WHERE id > ?";
  if (filter.experiment_id != 0) sql += " AND experiment_id = ?";
  if (filter.run_id != 0) sql += " AND run_id = ?";
  if (!filter.kind.empty()) sql += " AND kind = ?";
  sql += filter.newest_first ? " ORDER BY id DESC" : " ORDER BY id ASC";
  sql += " LIMIT ?";
  DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use(sql, "listing alerts"));
  st.Bind(filter.after_id);
  if (filter.experiment_id != 0) st.Bind(filter.experiment_id);
  if (filter.run_id != 0) st.Bind(filter.run_id);
  if (!filter.kind.empty()) st.Bind(filter.kind);
  st.Bind(filter.limit > 0 ? filter.limit : -1);
  std::vector<Alert> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    DROVER_RETURN_IF_ERROR(ReadAlert(st, &out.emplace_back()));
  }
  return out;
}

Status Store::InsertGpuSamples(const std::vector<GpuSample>& rows, const std::vector<int>& counts) {
  if (rows.size() != counts.size()) {
    return Internal("InsertGpuSamples: one count per row is needed");
  }
  DROVER_ASSIGN_OR_RETURN(
      Stmt st,
      impl_->Use(
          "INSERT INTO gpu_samples (" DROVER_GPU_SAMPLE_COLS
          ", samples) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
          // A period already stored (by an engine that stopped within it) is merged, weighted by
          // the readings on each side, not replaced.
          "ON CONFLICT (gpu, t_ms) DO UPDATE SET "
          "utilization = (utilization * samples + excluded.utilization * excluded.samples) / "
          "(samples + excluded.samples), "
          "memory_used = (memory_used * samples + excluded.memory_used * excluded.samples) / "
          "(samples + excluded.samples), "
          "memory_total = excluded.memory_total, "
          "temperature_c = (temperature_c * samples + excluded.temperature_c * excluded.samples) / "
          "(samples + excluded.samples), "
          "power_w = (power_w * samples + excluded.power_w * excluded.samples) / "
          "(samples + excluded.samples), "
          "pcie_tx = (pcie_tx * samples + excluded.pcie_tx * excluded.samples) / "
          "(samples + excluded.samples), "
          "pcie_rx = (pcie_rx * samples + excluded.pcie_rx * excluded.samples) / "
          "(samples + excluded.samples), "
          "samples = samples + excluded.samples",
          "storing GPU samples"));
  for (size_t i = 0; i < rows.size(); ++i) {
    const GpuSample& s = rows[i];
    st.Bind(s.index, s.t_ms, Known(s.utilization), Known(static_cast<double>(s.memory_used)),
            Known(static_cast<double>(s.memory_total)), Known(s.temperature_c), Known(s.power_w),
            Known(s.pcie_tx_bytes_per_s), Known(s.pcie_rx_bytes_per_s), counts[i]);
    DROVER_RETURN_IF_ERROR(st.Run());
    st.Reset();
  }
  return Status::Ok();
}

Result<std::vector<GpuSample>> Store::ListGpuSamples(int gpu, Millis since_ms, int limit) {
  std::string sql = "SELECT " DROVER_GPU_SAMPLE_COLS " FROM gpu_samples WHERE t_ms >= ?";
  if (gpu >= 0) sql += " AND gpu = ?";
  sql += " ORDER BY t_ms, gpu LIMIT ?";
  DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use(sql, "listing GPU samples"));
  st.Bind(since_ms);
  if (gpu >= 0) st.Bind(gpu);
  st.Bind(limit > 0 ? limit : -1);
  std::vector<GpuSample> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    GpuSample& s = out.emplace_back();
    s.index = static_cast<int>(st.Int(0));
    s.t_ms = st.Int(1);
    s.utilization = Unknown(st.Real(2));
    s.memory_used = static_cast<int64_t>(Unknown(st.Real(3)));
    s.memory_total = static_cast<int64_t>(Unknown(st.Real(4)));
    s.temperature_c = Unknown(st.Real(5));
    s.power_w = Unknown(st.Real(6));
    s.pcie_tx_bytes_per_s = Unknown(st.Real(7));
    s.pcie_rx_bytes_per_s = Unknown(st.Real(8));
  }
  return out;
}

Result<std::vector<std::string>> Store::RecentOutcomes(const std::string& fingerprint, int limit) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT a.reason FROM attempts a JOIN runs r ON r.id = a.run_id "
                          "WHERE r.fingerprint = ? ORDER BY a.id DESC LIMIT ?",
                          "reading a config's attempts"));
  st.Bind(fingerprint, limit);
  std::vector<std::string> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(st.Text(0));
  }
  return out;
}

Result<std::vector<UsageRow>> Store::Usage(Millis since_ms, Millis until_ms) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st,
      impl_->Use("SELECT e.user, COALESCE(json_extract(e.spec, '$.group'), ''), "
                 "SUM((MIN(CASE WHEN a.ended THEN a.ended_ms ELSE ?1 END, ?1) - "
                 "MAX(a.started_ms, ?2)) * json_array_length(a.gpus)), COUNT(DISTINCT r.id) "
                 "FROM attempts a JOIN runs r ON r.id = a.run_id "
                 "JOIN experiments e ON e.id = r.experiment_id "
                 "WHERE a.started_ms > 0 AND a.started_ms < ?1 AND json_array_length(a.gpus) > 0 "
                 "AND (a.ended = 0 OR a.ended_ms > ?2) "
                 "GROUP BY 1, 2 ORDER BY 3 DESC",
                 "summing GPU time by user"));
  st.Bind(until_ms, since_ms);
  std::vector<UsageRow> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    UsageRow u;
    u.user = st.Text(0);
    u.group = st.Text(1);
    u.gpu_ms = std::max(0.0, st.Real(2));
    u.runs = st.Int(3);
    out.push_back(std::move(u));
  }
  return out;
}

Result<StoreTotals> Store::Totals(const std::vector<double>& wait_bounds_s) {
  StoreTotals t;
  auto group = [&](const char* sql, const char* context,
                   std::map<std::string, int64_t>* out) -> Status {
    DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use(sql, context));
    for (;;) {
      DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      (*out)[st.Text(0)] = st.Int(1);
    }
    return Status::Ok();
  };
  DROVER_RETURN_IF_ERROR(group("SELECT state, count(*) FROM runs GROUP BY state", "counting runs",
                               &t.runs_by_state));
  DROVER_RETURN_IF_ERROR(group("SELECT kind, count(*) FROM alerts GROUP BY kind",
                               "counting alerts", &t.alerts_by_kind));
  DROVER_RETURN_IF_ERROR(group("SELECT reason, count(*) FROM attempts WHERE ended = 1 AND "
                               "reason NOT IN ('succeeded', '') GROUP BY reason",
                               "counting failed attempts", &t.attempt_failures_by_reason));

  // One pass over the started runs, summing each bucket in SQL.
  std::string sql = "SELECT count(*), COALESCE(sum(w), 0)";
  for (size_t i = 0; i < wait_bounds_s.size(); ++i) sql += ", COALESCE(sum(w <= ?), 0)";
  sql += " FROM (SELECT (started_ms - created_ms) / 1000.0 AS w FROM runs WHERE started_ms > 0)";
  DROVER_ASSIGN_OR_RETURN(Stmt st, impl_->Use(sql, "summing queue waits"));
  for (double b : wait_bounds_s) st.Bind(b);
  DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
  t.wait_bounds_s = wait_bounds_s;
  if (row) {
    t.wait_count = st.Int(0);
    t.wait_sum_s = st.Real(1);
    for (size_t i = 0; i < wait_bounds_s.size(); ++i) {
      t.wait_cumulative.push_back(st.Int(static_cast<int>(i) + 2));
    }
  }
  return t;
}

}  // namespace drover

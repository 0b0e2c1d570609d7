#include "sim/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>

#include "common/strings.h"

namespace drover::sim {
namespace {

// One CSV file with a header, read row by row; fields by column name. The traces have no quoted
// fields, so a comma always separates.
class CsvReader {
 public:
  static Result<CsvReader> Open(const std::string& path, const std::vector<std::string>& need) {
    CsvReader r;
    r.path_ = path;
    r.in_.open(path);
    if (!r.in_) return NotFound(fmt::format("cannot read trace {}", path));
    std::string header;
    if (!std::getline(r.in_, header)) return InvalidArgument(fmt::format("{}: empty file", path));
    if (!header.empty() && header.back() == '\r') header.pop_back();
    std::vector<std::string> names = Split(header, ',');
    for (size_t i = 0; i < names.size(); ++i) r.column_[std::string(Trim(names[i]))] = i;
    for (const std::string& n : need) {
      if (!r.column_.contains(n)) {
        return InvalidArgument(fmt::format("{}:1: no column '{}' (the header has: {}); is this the "
                                           "right --format?",
                                           path, n, header));
      }
    }
    return r;
  }

  // The next row; false at the end.
  bool Next() {
    std::string line;
    while (std::getline(in_, line)) {
      ++line_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (Trim(line).empty()) continue;
      fields_ = Split(line, ',');
      return true;
    }
    return false;
  }

  Result<std::string> Text(const std::string& name) const {
    size_t i = column_.at(name);
    if (i >= fields_.size()) return Error(name, "missing");
    return std::string(Trim(fields_[i]));
  }

  Result<double> Number(const std::string& name) const {
    DROVER_ASSIGN_OR_RETURN(std::string t, Text(name));
    double v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) {
      return Error(name, "'" + t + "' is not a number");
    }
    return v;
  }

  // A number that is to become an integer: at least 0 and at most `max`, so the cast is defined.
  Result<double> Amount(const std::string& name, double max) const {
    DROVER_ASSIGN_OR_RETURN(double v, Number(name));
    if (!(v >= 0 && v <= max)) return Error(name, fmt::format("{} is not from 0 to {}", v, max));
    return v;
  }

  Status Error(const std::string& name, const std::string& what) const {
    return InvalidArgument(fmt::format("{}:{}: column {}: {}", path_, line_, name, what));
  }
  int line() const { return line_; }

 private:
  std::string path_;
  std::ifstream in_;
  std::map<std::string, size_t> column_;
  std::vector<std::string> fields_;
  int line_ = 1;
};

}  // namespace

Result<int64_t> ParseUtcTime(const std::string& text) {
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char extra = 0;
  int n = std::sscanf(text.c_str(), "%4d-%2d-%2d %2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &extra);
  bool date_only = n == 3 && text.size() == 10;
  if (!(n == 6 || date_only) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
      s > 60) {
    return InvalidArgument(fmt::format(
        "'{}' is not a time; write YYYY-MM-DD or 'YYYY-MM-DD HH:MM:SS' (UTC)", text));
  }
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return static_cast<int64_t>(timegm(&tm));
}

Result<Trace> ReadPhillyTrace(const std::string& path, std::optional<int64_t> from_s,
                              std::optional<int64_t> to_s) {
  DROVER_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(path, {"timestamp", "duration",
                                                                "num_gpus", "cluster"}));
  Trace trace;
  trace.source = path;
  std::vector<std::pair<int64_t, TraceJob>> rows;
  int64_t id = 0;
  while (csv.Next()) {
    ++id;
    DROVER_ASSIGN_OR_RETURN(std::string stamp, csv.Text("timestamp"));
    auto submit = ParseUtcTime(stamp);
    if (!submit.ok()) return csv.Error("timestamp", submit.status().message());
    if ((from_s && *submit < *from_s) || (to_s && *submit >= *to_s)) continue;
    TraceJob j;
    j.id = id;
    DROVER_ASSIGN_OR_RETURN(j.duration_s, csv.Number("duration"));
    DROVER_ASSIGN_OR_RETURN(double gpus, csv.Number("num_gpus"));
    if (j.duration_s < 0) return csv.Error("duration", "negative");
    if (!(gpus >= 1 && gpus <= 1e6) || gpus != std::floor(gpus)) {
      return csv.Error("num_gpus", "not a whole number from 1 to 1000000");
    }
    j.gpus = static_cast<int>(gpus);
    DROVER_ASSIGN_OR_RETURN(j.group, csv.Text("cluster"));
    rows.emplace_back(*submit, std::move(j));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  trace.epoch_s = from_s ? *from_s : (rows.empty() ? 0 : rows.front().first);
  for (auto& [submit, j] : rows) {
    j.submit_s = static_cast<double>(submit - trace.epoch_s);
    trace.jobs.push_back(std::move(j));
  }
  return trace;
}

Result<Trace> ReadOpenbPods(const std::string& path) {
  DROVER_ASSIGN_OR_RETURN(CsvReader csv,
                          CsvReader::Open(path, {"name", "cpu_milli", "memory_mib", "num_gpu",
                                                 "gpu_milli", "qos", "creation_time",
                                                 "deletion_time"}));
  Trace trace;
  trace.source = path;
  int64_t id = 0;
  while (csv.Next()) {
    ++id;
    TraceJob j;
    j.id = id;
    DROVER_ASSIGN_OR_RETURN(double gpus, csv.Number("num_gpu"));
    if (gpus <= 0) continue;  // CPU-only pods take no GPU
    if (gpus > 1e6) return csv.Error("num_gpu", "more than 1000000");
    DROVER_ASSIGN_OR_RETURN(double milli, csv.Number("gpu_milli"));
    DROVER_ASSIGN_OR_RETURN(double cpu, csv.Amount("cpu_milli", 1e15));
    DROVER_ASSIGN_OR_RETURN(double mem, csv.Amount("memory_mib", 1e15));
    DROVER_ASSIGN_OR_RETURN(double created, csv.Number("creation_time"));
    DROVER_ASSIGN_OR_RETURN(double deleted, csv.Number("deletion_time"));
    if (milli <= 0 || milli > 1000) return csv.Error("gpu_milli", "not in 1..1000");
    j.gpus = static_cast<int>(gpus);
    j.gpu_milli = static_cast<int>(milli);
    j.cpu_milli = static_cast<int64_t>(cpu);
    j.memory_mib = static_cast<int64_t>(mem);
    j.submit_s = created;
    j.duration_s = std::max(0.0, deleted - created);
    DROVER_ASSIGN_OR_RETURN(j.group, csv.Text("qos"));
    trace.jobs.push_back(std::move(j));
  }
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  return trace;
}

Result<std::vector<TraceNode>> ReadOpenbNodes(const std::string& path) {
  DROVER_ASSIGN_OR_RETURN(CsvReader csv,
                          CsvReader::Open(path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  std::vector<TraceNode> nodes;
  while (csv.Next()) {
    TraceNode n;
    DROVER_ASSIGN_OR_RETURN(n.name, csv.Text("sn"));
    DROVER_ASSIGN_OR_RETURN(double cpu, csv.Amount("cpu_milli", 1e15));
    DROVER_ASSIGN_OR_RETURN(double mem, csv.Amount("memory_mib", 1e15));
    DROVER_ASSIGN_OR_RETURN(double gpus, csv.Amount("gpu", 1e6));
    if (gpus < 0 || gpus != std::floor(gpus)) return csv.Error("gpu", "not a whole number");
    n.cpu_milli = static_cast<int64_t>(cpu);
    n.memory_mib = static_cast<int64_t>(mem);
    n.gpus = static_cast<int>(gpus);
    DROVER_ASSIGN_OR_RETURN(n.model, csv.Text("model"));
    nodes.push_back(std::move(n));
  }
  return nodes;
}

}  // namespace drover::sim

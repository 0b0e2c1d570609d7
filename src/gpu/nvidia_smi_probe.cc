// The fallback GPU probe: nvidia-smi's CSV queries, for machines where NVML cannot be loaded but
// the tool runs (some containers mount nvidia-smi without exposing libnvidia-ml to dlopen).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string_view>

#include "common/strings.h"
#include "common/subprocess.h"
#include "gpu/gpu_probe.h"

namespace drover {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

const std::vector<std::string> kGpuFields = {"index",           "uuid",        "name",
                                             "utilization.gpu", "memory.used", "memory.total",
                                             "temperature.gpu", "power.draw"};
const std::vector<std::string> kAppFields = {"gpu_uuid", "pid", "used_memory"};

std::vector<std::string> QueryArgv(std::string_view query, const std::vector<std::string>& fields) {
  return {"nvidia-smi", fmt::format("--{}={}", query, Join(fields, ",")),
          "--format=csv,noheader,nounits"};
}

// nvidia-smi separates fields with ", "; names do not contain that pair.
std::vector<std::string> SplitFields(std::string_view line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = line.find(", ", start);
    if (comma == std::string_view::npos) {
      out.emplace_back(Trim(line.substr(start)));
      return out;
    }
    out.emplace_back(Trim(line.substr(start, comma - start)));
    start = comma + 2;
  }
}

// "[N/A]", "[Not Supported]", and the other bracketed words nvidia-smi prints instead of a value
// ("[Unknown Error]", "[Insufficient Permissions]"), and a bare "N/A".
bool IsUnknown(std::string_view field) {
  return field == "N/A" || (field.size() >= 2 && field.front() == '[' && field.back() == ']');
}

class CsvReader {
 public:
  CsvReader(std::string query, const std::vector<std::string>& fields)
      : query_(std::move(query)), fields_(fields) {}

  // Splits one line; an error when it does not have one value per queried field.
  Result<std::vector<std::string>> Fields(int line, std::string_view text) const {
    std::vector<std::string> values = SplitFields(text);
    if (values.size() != fields_.size()) {
      return Error(line, fmt::format("expected {} fields ({}), got {}: '{}'", fields_.size(),
                                     Join(fields_, ", "), values.size(), text));
    }
    return values;
  }

  // A number, or -1 when nvidia-smi does not know it; `name` says which field for errors.
  Result<double> Number(int line, const std::string& value, std::string_view name) const {
    if (IsUnknown(value)) return -1.0;
    char* end = nullptr;
    double x = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !(x >= 0)) {
      return Error(line, fmt::format("{} '{}' is not a number", name, value));
    }
    return x;
  }

  // MiB to bytes, -1 when unknown.
  Result<int64_t> MiB(int line, const std::string& value, std::string_view name) const {
    DROVER_ASSIGN_OR_RETURN(double mib, Number(line, value, name));
    if (mib < 0) return int64_t{-1};
    if (mib > 1e12) return Error(line, fmt::format("{} '{}' MiB is out of range", name, value));
    return static_cast<int64_t>(mib * kMiB);
  }

  Result<int> Integer(int line, const std::string& value, std::string_view name) const {
    char* end = nullptr;
    long long x = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || end != value.c_str() + value.size() || x < 0 || x > INT32_MAX) {
      return Error(line, fmt::format("{} '{}' is not a whole number", name, value));
    }
    return static_cast<int>(x);
  }

  Status Error(int line, std::string_view why) const {
    return InvalidArgument(fmt::format("nvidia-smi --{} output line {}: {}", query_, line, why));
  }

 private:
  std::string query_;
  const std::vector<std::string>& fields_;
};

// Calls `fn(line_number, text)` for each line that is not blank.
template <typename Fn>
Status ForEachLine(const std::string& text, Fn fn) {
  std::vector<std::string> lines = Split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = Trim(lines[i]);
    if (line.empty()) continue;
    DROVER_RETURN_IF_ERROR(fn(static_cast<int>(i) + 1, line));
  }
  return Status::Ok();
}

struct GpuRow {
  GpuSample sample;
  std::string uuid;
  std::string name;
};

Result<std::vector<GpuRow>> ParseGpuRows(const std::string& gpu_csv, Millis now) {
  CsvReader csv("query-gpu", kGpuFields);
  std::vector<GpuRow> rows;
  Status st = ForEachLine(gpu_csv, [&](int line, std::string_view text) -> Status {
    DROVER_ASSIGN_OR_RETURN(std::vector<std::string> f, csv.Fields(line, text));
    GpuRow row;
    GpuSample& s = row.sample;
    s.t_ms = now;
    DROVER_ASSIGN_OR_RETURN(s.index, csv.Integer(line, f[0], "index"));
    if (f[1].empty() || IsUnknown(f[1])) return csv.Error(line, "the GPU has no uuid");
    row.uuid = f[1];
    row.name = f[2];
    DROVER_ASSIGN_OR_RETURN(s.utilization, csv.Number(line, f[3], "utilization.gpu"));
    DROVER_ASSIGN_OR_RETURN(s.memory_used, csv.MiB(line, f[4], "memory.used"));
    DROVER_ASSIGN_OR_RETURN(s.memory_total, csv.MiB(line, f[5], "memory.total"));
    DROVER_ASSIGN_OR_RETURN(s.temperature_c, csv.Number(line, f[6], "temperature.gpu"));
    DROVER_ASSIGN_OR_RETURN(s.power_w, csv.Number(line, f[7], "power.draw"));
    rows.push_back(std::move(row));
    return Status::Ok();
  });
  DROVER_RETURN_IF_ERROR(st);
  return rows;
}

// The first line of what nvidia-smi printed, for errors ("NVIDIA-SMI has failed because ...").
std::string FirstLine(const std::string& out) {
  std::string_view t = Trim(out);
  return std::string(Trim(t.substr(0, t.find('\n'))));
}

Result<std::string> RunNvidiaSmi(const std::vector<std::string>& argv) {
  auto run = RunAndCapture(argv, CaptureOptions{.timeout_ms = 10'000});
  if (!run.ok()) {
    if (run.status().code() == Code::kNotFound) return Unavailable("nvidia-smi is not on PATH");
    return Unavailable(fmt::format("nvidia-smi could not run: {}", run.status().message()));
  }
  if (run->exit_code != 0) {
    std::string said = FirstLine(run->out);
    return Unavailable(fmt::format("'{}' failed (exit code {}){}", Join(argv, " "), run->exit_code,
                                   said.empty() ? "" : ": " + said));
  }
  return std::move(run->out);
}

class NvidiaSmiProbe : public GpuProbe {
 public:
  std::string Kind() const override { return "nvidia-smi"; }

  Result<std::vector<GpuDevice>> Devices() override {
    DROVER_ASSIGN_OR_RETURN(std::string gpu_csv, RunNvidiaSmi(QueryArgv("query-gpu", kGpuFields)));
    return ParseNvidiaSmiDevices(gpu_csv);
  }

  Result<std::vector<GpuSample>> Sample(Millis now) override {
    DROVER_ASSIGN_OR_RETURN(std::string gpu_csv, RunNvidiaSmi(QueryArgv("query-gpu", kGpuFields)));
    // Processes are the lesser part of a sample: without them the GPU values still count.
    auto apps = RunNvidiaSmi(QueryArgv("query-compute-apps", kAppFields));
    return ParseNvidiaSmiCsv(gpu_csv, apps.ok() ? *apps : std::string(), now);
  }

  std::string Describe() override {
    std::string out = "nvidia-smi (NVML could not be loaded)\n";
    return out + DescribeDevicesAndSmi(Devices());
  }
};

}  // namespace

Result<std::vector<GpuSample>> ParseNvidiaSmiCsv(const std::string& gpu_csv,
                                                 const std::string& apps_csv, Millis now) {
  DROVER_ASSIGN_OR_RETURN(std::vector<GpuRow> rows, ParseGpuRows(gpu_csv, now));
  std::map<std::string, size_t> by_uuid;
  for (size_t i = 0; i < rows.size(); ++i) by_uuid[rows[i].uuid] = i;

  CsvReader csv("query-compute-apps", kAppFields);
  Status st = ForEachLine(apps_csv, [&](int line, std::string_view text) -> Status {
    // Some versions say so in words instead of printing nothing.
    if (StartsWith(text, "No running")) return Status::Ok();
    DROVER_ASSIGN_OR_RETURN(std::vector<std::string> f, csv.Fields(line, text));
    GpuProcess p;
    DROVER_ASSIGN_OR_RETURN(p.pid, csv.Integer(line, f[1], "pid"));
    DROVER_ASSIGN_OR_RETURN(p.memory_used, csv.MiB(line, f[2], "used_memory"));
    // A GPU that appeared between the two queries is not in this sample, nor its processes.
    auto it = by_uuid.find(f[0]);
    if (it != by_uuid.end()) rows[it->second].sample.processes.push_back(p);
    return Status::Ok();
  });
  DROVER_RETURN_IF_ERROR(st);

  std::vector<GpuSample> samples;
  samples.reserve(rows.size());
  for (GpuRow& row : rows) samples.push_back(std::move(row.sample));
  return samples;
}

Result<std::vector<GpuDevice>> ParseNvidiaSmiDevices(const std::string& gpu_csv) {
  DROVER_ASSIGN_OR_RETURN(std::vector<GpuRow> rows, ParseGpuRows(gpu_csv, 0));
  std::vector<GpuDevice> devices;
  devices.reserve(rows.size());
  for (GpuRow& row : rows) {
    if (row.sample.memory_total <= 0) {
      return InvalidArgument(fmt::format(
          "nvidia-smi gives no memory.total for GPU {} ({}), so no work can be placed on it by "
          "memory; use --fake-gpus to declare the GPUs",
          row.sample.index, row.uuid));
    }
    GpuDevice d;
    d.index = row.sample.index;
    d.uuid = std::move(row.uuid);
    d.name = std::move(row.name);
    d.memory_total = row.sample.memory_total;
    d.memory_used = std::max<int64_t>(0, row.sample.memory_used);
    devices.push_back(std::move(d));
  }
  return devices;
}

Result<std::unique_ptr<GpuProbe>> OpenNvidiaSmiProbe() {
  DROVER_ASSIGN_OR_RETURN(std::string gpu_csv, RunNvidiaSmi(QueryArgv("query-gpu", kGpuFields)));
  auto devices = ParseNvidiaSmiDevices(gpu_csv);
  if (!devices.ok()) {
    return Unavailable(
        fmt::format("nvidia-smi output not understood: {}", devices.status().message()));
  }
  if (devices->empty()) return Unavailable("nvidia-smi lists no GPU");
  return std::unique_ptr<GpuProbe>(std::make_unique<NvidiaSmiProbe>());
}

}  // namespace drover

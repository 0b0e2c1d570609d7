// drover tensorboard EXP [--out DIR]: lays out an experiment's stored metrics as TensorBoard
// event files, one folder per run named by its id and the parameters that vary across the
// experiment, so `tensorboard --logdir DIR` shows every run's curves side by side, whatever
// wrote them (drover.log lines, the run's own event files, derived metrics). docs/metrics.md.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <set>

#include "cli/catalog.h"
#include "common/files.h"
#include "cli/common.h"
#include "tfevents/writer.h"

namespace drover::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kEventFileName = "events.out.tfevents.0.drover";

struct TensorboardFlags {
  std::string experiment;
  std::string out;
};

std::string ValueText(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// "12-model=cnn,batch_size=32": safe as one folder name (no '/', no leading '.'), at most 200
// bytes.
std::string FolderName(const Run& run, const std::vector<std::string>& varying) {
  std::string name = std::to_string(run.id);
  std::string params;
  for (const auto& k : varying) {
    if (!run.params.contains(k)) continue;
    if (!params.empty()) params += ",";
    params += k + "=" + ValueText(run.params[k]);
  }
  if (!params.empty()) name += "-" + params;
  for (char& c : name) {
    if (c == '/' || c == '\0' || std::iscntrl(static_cast<unsigned char>(c))) c = '_';
  }
  if (name.size() > 200) name.resize(200);
  return name;
}

Status WriteAtomically(const fs::path& path, const std::string& bytes) {
  return WriteFileAtomically(path.string(), bytes);
}

int TensorboardCmd(Globals& g, const TensorboardFlags& f) {
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  auto exp = (*catalog)->FindExperiment(f.experiment);
  if (!exp.ok()) return ReportError(exp.status());
  RunFilter filter;
  filter.experiment_id = exp->id;
  auto runs = (*catalog)->ListRuns(filter);
  if (!runs.ok()) return ReportError(runs.status());
  // Name folders by the parameters that differ between runs (all of them when one run).
  std::map<std::string, std::set<std::string>> values;
  for (const Run& r : *runs) {
    for (const auto& [k, v] : r.params.items()) values[k].insert(v.dump());
  }
  std::vector<std::string> varying;
  for (const auto& [k, v] : values) {
    if (v.size() > 1 || runs->size() == 1) varying.push_back(k);
  }
  const fs::path out = f.out.empty() ? fs::path(fmt::format("tensorboard/{}-{}", exp->name, exp->id))
                                     : fs::path(f.out);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return ReportError(Status(Code::kIo, fmt::format("cannot create {}: {}", out.string(),
                                                           ec.message())));
  int64_t written_points = 0, written_runs = 0;
  for (const Run& r : *runs) {
    auto series = (*catalog)->GetMetricSeries(r.id, SeriesQuery{});
    if (!series.ok()) return ReportError(series.status());
    std::string bytes;
    tfevents::EventWriter w(&bytes);
    w.FileVersion(r.created_ms / 1000.0);
    int64_t n = 0;
    // Each metric's points in attempt-then-step order: a retried or resumed run's later attempt
    // restarts at a lower step, which TensorBoard shows as the curve going on from there.
    for (const auto& s : *series) {
      for (const auto& p : s.points) {
        w.Scalar(p.t_ms / 1000.0, p.step, s.name, p.value);
        ++n;
      }
    }
    const fs::path dir = out / FolderName(r, varying);
    // This run's folder from an earlier layout (other params varied then): its file goes, so
    // TensorBoard does not show the run twice. Only drover's own file, and the folder if empty.
    const std::string id = std::to_string(r.id);
    for (const auto& e : fs::directory_iterator(out, ec)) {
      const std::string name = e.path().filename().string();
      if (e.path() == dir || !(name == id || name.starts_with(id + "-"))) continue;
      if (e.is_symlink(ec) || !e.is_directory(ec)) continue;
      fs::remove(e.path() / kEventFileName, ec);
      fs::remove(e.path(), ec);  // only when nothing else is in it
    }
    ec.clear();
    fs::create_directories(dir, ec);
    if (ec) return ReportError(Status(Code::kIo, fmt::format("cannot create {}: {}", dir.string(),
                                                             ec.message())));
    Status st = WriteAtomically(dir / kEventFileName, bytes);
    if (!st.ok()) return ReportError(st);
    written_points += n;
    ++written_runs;
  }
  fmt::print("wrote {} runs ({} points) of experiment {} ({}) to {}\n", written_runs,
             written_points, exp->id, exp->name, out.string());
  fmt::print("view them with: tensorboard --logdir {}\n", out.string());
  return kExitOk;
}

}  // namespace

Command RegisterTensorboard(CLI::App& root, Globals& g) {
  auto f = std::make_shared<TensorboardFlags>();
  CLI::App* app = root.add_subcommand(
      "tensorboard",
      "Lay out an experiment's metrics as TensorBoard event files, one folder per run");
  app->add_option("experiment", f->experiment, "Experiment id or name (the newest of that name)")
      ->required();
  app->add_option("-o,--out", f->out,
                  "Folder to write (default: tensorboard/<name>-<id>); written again in place");
  return {app, [&g, f] { return TensorboardCmd(g, *f); }};
}

}  // namespace drover::cli

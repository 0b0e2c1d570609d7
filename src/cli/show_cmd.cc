// drover show RUN: everything recorded about one run.
#include <algorithm>
#include <fmt/format.h>

#include "cli/catalog.h"
#include "cli/common.h"
#include "common/strings.h"
#include "common/terminal.h"
#include "protocol/api.h"
#include "protocol/json_codec.h"

namespace drover::cli {
namespace {

struct ShowFlags {
  std::string run;
  bool json = false;
};

int Show(Globals& g, const ShowFlags& f) {
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  auto id = ParseRunId(f.run);
  if (!id.ok()) return ReportError(id.status());
  auto detail = (*catalog)->GetRunDetail(*id);
  if (!detail.ok()) return ReportError(detail.status());
  const Run* run = &detail->run;
  const std::vector<Attempt>* attempts = &detail->attempts;
  const Experiment& e = detail->experiment;
  const std::optional<Snapshot>& snapshot = detail->snapshot;
  // The environment of this run's interpreter (recorded once per experiment and interpreter):
  // the latest attempt's program, else the spec's command.
  std::vector<Environment> env_list;
  {
    const bool shell = e.spec.is_object() && e.spec.value("shell", false);
    std::vector<std::string> argv;
    if (!attempts->empty()) {
      argv = attempts->back().argv;
    } else if (e.spec.is_object() && e.spec.contains("command") && e.spec["command"].is_array()) {
      for (const auto& w : e.spec["command"]) argv.push_back(w.is_string() ? w.get<std::string>() : "");
    }
    const std::string interpreter = InterpreterOf(argv, shell);
    for (const Environment& env : detail->environments) {
      if (env.interpreter == interpreter) env_list.push_back(env);
    }
    detail->environments = env_list;
  }

  if (f.json) {
    std::printf("%s\n", protocol::ToJson(*detail).dump(2).c_str());
    return kExitOk;
  }

  std::string out;
  out += fmt::format("run {}  {}  (experiment {} {}, grid point {})\n", run->id,
                     ToString(run->state), e.id, TerminalLine(e.name), run->index + 1);
  if (!run->reason.empty() && run->state != RunState::kSucceeded) {
    out += fmt::format("reason       {}\n", TerminalLine(run->reason));
  }
  if (detail->waiting) out += fmt::format("waiting      {}\n", detail->waiting->reason);
  if (!e.user.empty()) {
    out += fmt::format("submitted    by {}, {}\n", e.user, FormatTime(e.created_ms));
  }
  out += fmt::format("params       {}\n", run->params.dump());
  // What the run logged itself (drover.log_hparams, drover.torch.autolog), beside the spec's
  // params; and its checkpoint and TensorBoard files, from its latest attempt that has them.
  for (auto a = attempts->rbegin(); a != attempts->rend(); ++a) {
    if (a->hparams.empty()) continue;
    std::string h;
    for (auto it = a->hparams.begin(); it != a->hparams.end(); ++it) {
      h += (h.empty() ? "" : "  ") + it.key() + "=" + FormatValue(it.value());
    }
    out += fmt::format("hparams      {}{}\n", TerminalLine(h),
                       a->number == attempts->back().number
                           ? std::string()
                           : fmt::format(" (attempt {})", a->number));
    break;
  }
  if (!attempts->empty() && attempts->back().checkpoint) {
    const CheckpointMark& c = *attempts->back().checkpoint;
    out += fmt::format("checkpoint   step {}, saved {}\n", c.step, FormatTime(c.t_ms));
  }
  if (!attempts->empty() && !attempts->back().event_files.empty()) {
    for (const auto& [path, ef] : attempts->back().event_files) {
      out += fmt::format("tensorboard  {} ({} read{})\n", TerminalLine(path), FormatBytes(ef.offset),
                         ef.corrupt > 0 ? fmt::format(", {} damaged record(s) skipped", ef.corrupt)
                                        : std::string());
    }
  }
  if (run->current_params != run->params) {
    out += fmt::format("last params  {}\n", run->current_params.dump());
  }
  const Resources& r = run->resources;
  out += fmt::format("resources    {} GPU{}{}, {} CPU slot{}\n", r.gpus, r.gpus == 1 ? "" : "s",
                     r.gpu_memory > 0 ? ", " + FormatBytes(r.gpu_memory) + " each" : "", r.cpus,
                     r.cpus == 1 ? "" : "s");
  out += fmt::format("fingerprint  {}\n", run->fingerprint);
  if (!run->stage.empty()) {
    std::vector<std::string> needs;
    for (int64_t n : run->needs) needs.push_back(std::to_string(n));
    out += fmt::format("stage        {}{}\n", TerminalLine(run->stage),
                       needs.empty() ? "" : " (needs runs " + Join(needs, ", ") + ")");
  }
  if (run->cached_from != 0) {
    out += fmt::format("cached from  run {} (the same fingerprint succeeded there; `drover "
                       "artifacts {}` lists its outputs)\n",
                       run->cached_from, run->id);
  }
  if (snapshot) {
    const Snapshot& s = *snapshot;
    out += fmt::format("code         snapshot {} ({} files, {})\n", s.hash.substr(0, 16), s.files,
                       FormatBytes(s.bytes));
    if (s.git) {
      // The experiment's own commit: a snapshot is shared by every experiment with the same files.
      out += fmt::format("git          {}{}\n", e.git_commit.empty() ? "(no commit)" : e.git_commit,
                         e.git_diff.empty() ? ""
                                            : fmt::format(" + uncommitted diff ({} lines)",
                                                          Split(e.git_diff, '\n').size()));
    }
  }
  if (!run->snapshot_hash.empty()) {
    out += fmt::format("code now     snapshot {} of the workdir, from attempt {} on (drover retry "
                       "--code current); attempts before it ran the one above\n",
                       run->snapshot_hash.substr(0, 16), run->snapshot_from);
  }
  if (const std::string c = DescribeContainer(e.spec); !c.empty()) {
    out += fmt::format("container    {}\n", c);
  }
  {
    for (const auto& env : env_list) {
      out += fmt::format("host         {}\n", env.hostname);
      if (!env.interpreter.empty()) {
        size_t n = env.packages.empty() ? 0 : Split(env.packages, '\n').size();
        out += fmt::format("interpreter  {} ({} packages recorded; --json shows them)\n",
                           env.interpreter, n);
      }
      if (!env.gpu_info.empty()) {
        out += fmt::format("gpu info     {}\n", Split(env.gpu_info, '\n')[0]);
      }
    }
  }
  if (!run->final_metrics.empty()) {
    std::string m;
    for (auto it = run->final_metrics.begin(); it != run->final_metrics.end(); ++it) {
      m += (m.empty() ? "" : "  ") + it.key() + "=" + FormatValue(it.value());
    }
    out += fmt::format("metrics      {}\n", TerminalLine(m));
  }
  if (!detail->rungs.empty()) {
    const Json& prune = detail->experiment.spec.value("prune", Json::object());
    const std::string metric = prune.is_object() ? prune.value("metric", "value") : "value";
    out += "\nrungs (where the prune rule compared it, and the report it judged)\n";
    std::vector<std::vector<std::string>> rung_rows;
    for (const RungRecord& g : detail->rungs) {
      rung_rows.push_back(
          {std::to_string(g.rung), fmt::format("{} {}", g.unit, g.step),
           g.report_step > 0 ? fmt::format("step {}", g.report_step) : "-",
           FormatValue(Json(g.value)),
           g.pruned ? fmt::format("pruned at rung {}", g.rung) : "went on"});
    }
    out += RenderTable({"rung", "at", "report", metric, "decision"}, rung_rows);
  }
  out += "\nattempts\n";
  std::vector<std::vector<std::string>> rows;
  // Attempts an executor placed (Slurm) say where instead of the GPUs drover gave.
  const bool placed = std::any_of(attempts->begin(), attempts->end(),
                                  [](const Attempt& a) { return !DescribePlacement(a.executor).empty(); });
  for (const auto& a : *attempts) {
    std::string exit = a.signal ? fmt::format("signal {}", a.signal)
                                : (a.ended ? std::to_string(a.exit_code) : "-");
    std::string where = placed ? DescribePlacement(a.executor)
                               : a.cuda_visible_devices.empty() ? "(none)"
                                                                : a.cuda_visible_devices;
    rows.push_back({std::to_string(a.number), a.ended ? a.reason : "running", exit,
                    where.empty() ? "-" : where, FormatTime(a.started_ms),
                    a.ended ? FormatDuration(a.ended_ms - a.started_ms) : "-",
                    ParamsDiff(run->params, a.params)});
  }
  out += RenderTable({"#", "outcome", "exit", placed ? "where" : "CUDA_VISIBLE_DEVICES",
                      "started", "took", "changed params"},
                     rows);
  // Why the last attempt failed, in its own words (the end of its stderr).
  if (!attempts->empty() && attempts->back().ended && !attempts->back().error.empty()) {
    out += fmt::format("\nattempt {} ended with ({}, the end of its stderr):\n",
                       attempts->back().number, attempts->back().reason);
    for (const auto& line : Split(attempts->back().error, '\n')) {
      out += "  " + std::string(line) + "\n";
    }
  }
  if (!attempts->empty()) {
    const Attempt& last = attempts->back();
    std::vector<std::string> quoted;
    for (const auto& w : last.argv) quoted.push_back(ShellQuote(w));
    out += fmt::format("\ncommand      {}\nworkdir      {}\nlogs         {}\n             {}\n",
                       Join(quoted, " "), last.workdir, last.stdout_path, last.stderr_path);
  }
  // Names, hyper-parameters and failure lines are the run's own text: shown, never obeyed.
  PrintText(out);
  return kExitOk;
}

}  // namespace

Command RegisterShow(CLI::App& root, Globals& g) {
  auto f = std::make_shared<ShowFlags>();
  CLI::App* app = root.add_subcommand("show", "Show everything recorded about a run");
  app->add_option("run", f->run, "Run id, as `drover ls` lists it")->required();
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return Show(g, *f); }};
}

}  // namespace drover::cli

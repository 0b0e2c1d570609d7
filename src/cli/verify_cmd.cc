// drover verify RUN: re-hashes what a run's result rests on, without running anything: the code
// snapshot it ran from and the outputs it stored (a pipeline stage's artifacts), and names every
// file that is no longer what was recorded (docs/pipelines.md, "Verify"). Exit 0 when all is
// intact, 1 when something changed.
#include <fmt/format.h>

#include "cli/client.h"
#include "cli/common.h"
#include "exec/artifacts.h"
#include "exec/snapshot.h"
#include "store/store.h"

namespace drover::cli {
namespace {

struct VerifyFlags {
  std::string run;
  bool json = false;
};

// The check in this process, from the store (no daemon serves it).
Result<Json> VerifyHere(Globals& g, int64_t id) {
  DROVER_ASSIGN_OR_RETURN(auto store, OpenStore(g, false));
  Store& s = *store;
  DROVER_ASSIGN_OR_RETURN(std::optional<Run> run, s.GetRun(id));
  if (!run) return NotFound(fmt::format("no run {} in this store; `drover ls` lists runs", id));
  DROVER_ASSIGN_OR_RETURN(std::optional<Experiment> exp, s.GetExperiment(run->experiment_id));
  if (!exp) return Internal(fmt::format("run {} has no experiment", id));
  const std::string dir = s.Dir();
  Json out = {{"run", id}, {"snapshot", exp->snapshot_hash}};
  // The code it ran from.
  DROVER_ASSIGN_OR_RETURN(std::optional<Snapshot> snap, s.GetSnapshot(exp->snapshot_hash));
  std::vector<std::string> code;
  if (!snap) {
    code.push_back("snapshot " + exp->snapshot_hash + " is not recorded");
  } else {
    out["snapshot_files"] = snap->files;
    auto checked = VerifySnapshot(*snap, dir + "/snapshots");
    if (!checked.ok()) code.push_back(checked.status().message());
    else code = *checked;
  }
  out["code"] = code;
  // What it stored.
  DROVER_ASSIGN_OR_RETURN(RunArtifacts arts, s.RunOutputs(id, dir));
  const std::vector<std::string> outputs = VerifyArtifacts(dir, arts.source_run, arts.files);
  out["artifacts"] = {{"files", arts.files.size()}, {"changed", outputs},
                      {"source_run", arts.source_run}};
  out["intact"] = code.empty() && outputs.empty();
  return out;
}

int Verify(Globals& g, const VerifyFlags& f) {
  auto id = ParseRunId(f.run);
  if (!id.ok()) return ReportError(id.status());
  // A daemon serving the store checks it (GET /runs/{id}/verify): a shared daemon's store is its
  // own, and it reads a user's snapshot with that user's rights.
  Result<Json> checked = Internal("unset");
  if (auto daemon = FindDaemon(g)) {
    ApiClient api(*daemon);
    checked = api.Get(fmt::format("/runs/{}/verify", *id), 600);
  } else {
    checked = VerifyHere(g, *id);
  }
  if (!checked.ok()) return ReportError(checked.status());
  const Json& out = *checked;
  const bool intact = out.value("intact", false);
  if (f.json) {
    std::fputs((out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n").c_str(), stdout);
    return intact ? kExitOk : 1;
  }
  const auto code = out.value("code", std::vector<std::string>{});
  const Json arts = out.value("artifacts", Json::object());
  const auto outputs = arts.value("changed", std::vector<std::string>{});
  const int64_t files = arts.value("files", int64_t{0});
  const int64_t source = arts.value("source_run", *id);
  std::string text;
  if (out.contains("snapshot_files")) {
    text += fmt::format("code       snapshot {} ({} files): {}\n",
                        out.value("snapshot", std::string()).substr(0, 16),
                        out.value("snapshot_files", int64_t{0}), code.empty() ? "intact" : "CHANGED");
  }
  for (const std::string& c : code) text += "           " + c + "\n";
  text += fmt::format("artifacts  {} file{}{}: {}\n", files, files == 1 ? "" : "s",
                      source != *id ? fmt::format(" (of run {})", source) : "",
                      outputs.empty() ? "intact" : "CHANGED");
  for (const std::string& c : outputs) text += "           " + c + "\n";
  text += intact ? fmt::format("run {}: everything it rests on is as recorded\n", *id)
                 : fmt::format("run {}: files changed since it ran (listed above); its result "
                               "may not be what these files give now\n",
                               *id);
  PrintText(text);  // file names are the user's: shown, never obeyed by the terminal
  return intact ? kExitOk : 1;
}

}  // namespace

Command RegisterVerify(CLI::App& root, Globals& g) {
  auto f = std::make_shared<VerifyFlags>();
  CLI::App* app = root.add_subcommand(
      "verify", "Re-hash a run's code snapshot and stored outputs; name any file that changed");
  app->add_option("run", f->run, "The run's id")->required();
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return Verify(g, *f); }};
}

}  // namespace drover::cli

// drover verify RUN: re-hashes what a run's result rests on, without running anything: the code
// snapshot it ran from and the outputs it stored (a pipeline stage's artifacts), and names every
// file that is no longer what was recorded (docs/pipelines.md, "Verify"). Exit 0 when all is
// intact, 1 when something changed.
#include <fmt/format.h>

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

int Verify(Globals& g, const VerifyFlags& f) {
  auto id = ParseRunId(f.run);
  if (!id.ok()) return ReportError(id.status());
  auto store = OpenStore(g, false);
  if (!store.ok()) return ReportError(store.status());
  Store& s = **store;
  auto run = s.GetRun(*id);
  if (!run.ok()) return ReportError(run.status());
  if (!*run) return ReportError(NotFound(fmt::format("no run {} in this store; `drover ls` lists runs", *id)));
  auto exp = s.GetExperiment((*run)->experiment_id);
  if (!exp.ok()) return ReportError(exp.status());
  if (!*exp) return ReportError(Internal(fmt::format("run {} has no experiment", *id)));
  const std::string dir = s.Dir();
  Json out = {{"run", *id}, {"snapshot", (*exp)->snapshot_hash}};
  std::vector<std::string> problems;
  // The code it ran from.
  auto snap = s.GetSnapshot((*exp)->snapshot_hash);
  if (!snap.ok()) return ReportError(snap.status());
  std::vector<std::string> code;
  if (!*snap) {
    code.push_back("snapshot " + (*exp)->snapshot_hash + " is not recorded");
  } else {
    auto checked = VerifySnapshot(**snap, dir + "/snapshots");
    if (!checked.ok()) code.push_back(checked.status().message());
    else code = *checked;
  }
  out["code"] = code;
  // What it stored.
  auto arts = s.RunOutputs(*id, dir);
  if (!arts.ok()) return ReportError(arts.status());
  const std::vector<std::string> outputs = VerifyArtifacts(dir, arts->source_run, arts->files);
  out["artifacts"] = {{"files", arts->files.size()}, {"changed", outputs}};
  const bool intact = code.empty() && outputs.empty();
  out["intact"] = intact;
  if (f.json) {
    std::fputs((out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n").c_str(), stdout);
    return intact ? kExitOk : 1;
  }
  std::string text;
  if (*snap) {
    text += fmt::format("code       snapshot {} ({} files): {}\n", (*snap)->hash.substr(0, 16),
                        (*snap)->files, code.empty() ? "intact" : "CHANGED");
  }
  for (const std::string& c : code) text += "           " + c + "\n";
  text += fmt::format("artifacts  {} file{}{}: {}\n", arts->files.size(),
                      arts->files.size() == 1 ? "" : "s",
                      arts->source_run != *id ? fmt::format(" (of run {})", arts->source_run) : "",
                      outputs.empty() ? "intact" : "CHANGED");
  for (const std::string& c : outputs) text += "           " + c + "\n";
  text += intact ? fmt::format("run {}: everything it rests on is as recorded\n", *id)
                 : fmt::format("run {}: files changed since it ran (listed above); its result "
                               "may not be what these files give now\n",
                               *id);
  std::fputs(text.c_str(), stdout);
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

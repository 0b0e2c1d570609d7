// drover why RUN: why a run waits, in the scheduler's own words (in the spirit of Slurm's
// Reason=): no GPU has the memory it asks for, max_parallel, its team's quota, GPUs held for a
// waiting gang, a stage it needs, no CPU slot. docs/scheduling.md, "Why a run waits".
#include <fmt/format.h>

#include "cli/catalog.h"
#include "cli/common.h"

namespace drover::cli {
namespace {

struct WhyFlags {
  std::string run;
  bool json = false;
};

int WhyCmd(Globals& g, const WhyFlags& f) {
  auto id = ParseRunId(f.run);
  if (!id.ok()) return ReportError(id.status());
  const bool daemon = FindDaemon(g).has_value();
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  auto d = (*catalog)->GetRunDetail(*id);
  if (!d.ok()) return ReportError(d.status());
  const Run& r = d->run;
  std::string code, text;
  if (IsFinal(r.state)) {
    code = std::string(ToString(r.state));
    const bool said = r.reason.empty() || r.reason == ToString(r.state);
    text = fmt::format("it has ended: {}{}", ToString(r.state),
                       said ? std::string() : " (" + r.reason + ")");
  } else if (r.state == RunState::kRunning && !(d->waiting && d->waiting->code == "executor")) {
    code = "running";
    text = "it is running";
  } else if (d->waiting) {
    code = d->waiting->code;
    text = d->waiting->reason;
  } else if (!daemon) {
    code = "no_daemon";
    text = "no daemon serves this store, so nothing schedules it now; `drover serve` (or "
           "`drover run`) starts one";
  } else {
    code = "unknown";
    text = "the daemon has not looked at it yet; ask again in a few seconds";
  }
  if (f.json) {
    fmt::print("{}\n", Json{{"run_id", r.id}, {"state", ToString(r.state)}, {"code", code},
                            {"reason", text}}.dump());
  } else {
    PrintText(fmt::format("run {} ({}): {}\n", r.id, ToString(r.state), text));
  }
  return kExitOk;
}

}  // namespace

Command RegisterWhy(CLI::App& root, Globals& g) {
  auto f = std::make_shared<WhyFlags>();
  CLI::App* app = root.add_subcommand("why", "Say why a run waits, in the scheduler's own words");
  app->add_option("run", f->run, "Run id")->required();
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return WhyCmd(g, *f); }};
}

}  // namespace drover::cli

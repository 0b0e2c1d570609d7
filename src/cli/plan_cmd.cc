// drover plan [--recipe FILE] [--json] "INSTRUCTION": an instruction in English or Chinese -> a
// spec, from the project's recipe (drover.yaml), with nothing submitted. drover ask does the same
// and then runs it (after a confirmation, or --yes).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/common.h"
#include "cli/run_flags.h"
#include "common/strings.h"
#include "plan/planner.h"
#include "spec/expand.h"
#include "spec/spec_parser.h"

namespace drover::cli {
namespace {

struct PlanFlags {
  std::string instruction;
  std::string recipe;
  bool json = false;
  bool yes = false;    // ask only
  bool force = false;  // ask only: --yes even when words were ignored
  RunFlags run;        // ask only: how the plan runs, as `drover run` takes it
};

struct Planned {
  Recipe recipe;
  Plan plan;
  int runs = 0;
};

Result<Planned> MakePlan(const PlanFlags& f) {
  Planned p;
  std::string path = f.recipe;
  if (path.empty()) {
    DROVER_ASSIGN_OR_RETURN(path, FindRecipe(std::filesystem::current_path().string()));
  }
  DROVER_ASSIGN_OR_RETURN(p.recipe, LoadRecipe(path));
  DROVER_ASSIGN_OR_RETURN(p.plan, PlanInstruction(p.recipe, f.instruction));
  DROVER_ASSIGN_OR_RETURN(p.runs, PlannedRuns(p.plan, p.recipe));
  return p;
}

void PrintPlan(const Planned& p, bool json) {
  if (json) {
    Json out = {{"spec", p.plan.spec},
                {"spec_yaml", p.plan.spec_yaml},
                {"runs", p.runs},
                {"understood", p.plan.understood},
                {"ignored", p.plan.ignored},
                {"recipe", p.recipe.source}};
    std::printf("%s\n", out.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
    return;
  }
  std::printf("plan: %d run%s from %s\n", p.runs, p.runs == 1 ? "" : "s", p.recipe.source.c_str());
  for (const auto& u : p.plan.understood) std::printf("  understood: %s\n", u.c_str());
  for (const auto& i : p.plan.ignored) std::printf("  ignored:    %s\n", i.c_str());
  std::printf("\n%s", p.plan.spec_yaml.c_str());
  if (!p.plan.spec_yaml.empty() && p.plan.spec_yaml.back() != '\n') std::printf("\n");
}

int PlanCmd(Globals& g, const PlanFlags& f) {
  auto p = MakePlan(f);
  if (!p.ok()) return ReportError(p.status());
  PrintPlan(*p, f.json);
  return kExitOk;
}

int AskCmd(Globals& g, const PlanFlags& f) {
  auto p = MakePlan(f);
  if (!p.ok()) return ReportError(p.status());
  // With --json, stdout carries the results only (one JSON document); the plan goes to stderr.
  if (!f.json) {
    PrintPlan(*p, false);
  } else {
    std::fprintf(stderr, "plan: %d run%s: %s\n", p->runs, p->runs == 1 ? "" : "s",
                 Join(p->plan.understood, "; ").c_str());
    if (!p->plan.ignored.empty()) {
      std::fprintf(stderr, "plan: ignored: %s\n", Join(p->plan.ignored, "; ").c_str());
    }
  }
  // Words the planner could not use may have meant something ("but not mlp"): submitting
  // without a look needs --force too.
  if (f.yes && !p->plan.ignored.empty() && !f.force) {
    return ReportError(InvalidArgument(fmt::format(
        "the plan ignored '{}'; rephrase, or add --force to submit it as shown",
        Join(p->plan.ignored, "', '"))));
  }
  if (!f.yes && !f.run.dry_run) {
    if (!::isatty(STDIN_FILENO)) {
      return ReportError(InvalidArgument(
          "drover ask needs a confirmation and stdin is not a terminal; add --yes to submit "
          "the plan as shown"));
    }
    std::printf("\nsubmit these %d run%s? [y/N] ", p->runs, p->runs == 1 ? "" : "s");
    std::fflush(stdout);
    std::string answer;
    std::getline(std::cin, answer);
    std::string a(Trim(answer));
    if (a != "y" && a != "Y" && a != "yes") {
      std::printf("nothing submitted\n");
      return kExitOk;
    }
  }
  // The plan becomes a spec file in the store, kept with the experiment it starts, and runs the
  // way `drover run` runs any spec (through the daemon when one serves the store).
  std::string dir = StoreDir(g) + "/plans";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ReportError(IoStatus("creating " + dir, ec));
  std::string name = p->plan.spec.value("name", std::string("plan"));
  std::string path = fmt::format("{}/{}-{}.yaml", dir, name, ::getpid());
  {
    std::ofstream out(path);
    out << "# drover ask: " << f.instruction << "\n" << p->plan.spec_yaml;
    if (!out) return ReportError(Status(Code::kIo, "writing " + path));
  }
  RunFlags run = f.run;
  run.spec_path = path;
  run.json = f.json;
  return RunSpec(g, run);
}

}  // namespace

Command RegisterPlan(CLI::App& root, Globals& g) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* app = root.add_subcommand(
      "plan", "Turn an instruction (English or Chinese) into a spec from the project's drover.yaml; "
              "nothing is submitted");
  app->add_option("instruction", f->instruction,
                  "e.g. \"compare resnet50 and efficientnet at batch size 32 and 64\"")
      ->required();
  app->add_option("--recipe", f->recipe, "The recipe (default: drover.yaml here or above)");
  app->add_flag("--json", f->json, "Print {spec, understood, ignored, runs} as JSON");
  return {app, [&g, f] { return PlanCmd(g, *f); }};
}

Command RegisterAsk(CLI::App& root, Globals& g) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* app = root.add_subcommand(
      "ask", "Plan an instruction like drover plan, show it, and run it after you confirm");
  app->add_option("instruction", f->instruction, "What to try, in English or Chinese")->required();
  app->add_option("--recipe", f->recipe, "The recipe (default: drover.yaml here or above)");
  app->add_flag("-y,--yes", f->yes, "Submit without asking (refused when words were ignored)");
  app->add_flag("--force", f->force, "With --yes: submit even when words were ignored");
  app->add_flag("--json", f->json, "Print the plan and the results as JSON");
  // Then it runs as `drover run` would: the same options.
  AddRunOptions(app, &f->run, /*json=*/false);
  return {app, [&g, f] { return AskCmd(g, *f); }};
}

}  // namespace drover::cli

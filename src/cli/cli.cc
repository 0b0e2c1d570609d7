#include "cli/cli.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/common.h"
#include "common/strings.h"
#include "drover_version.h"

namespace drover::cli {

Command RegisterGpu(CLI::App& root, Globals& g);  // gpu_cmd.cc

int Main(int argc, char** argv) {
  CLI::App app{
      "drover: GPU experiment automation. Say what to try; drover runs, records and "
      "compares it."};
  app.set_version_flag("--version", DROVER_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand
  Globals g;
  app.add_option(
      "--store", g.store_dir,
      "Store folder (holds drover.db, snapshots, logs); default $DROVER_HOME or ./.drover");
  app.add_flag("-v,--verbose", g.verbose, "Log what drover does to stderr");

  std::vector<Command> commands = {
      RegisterRun(app, g),   RegisterSubmit(app, g),  RegisterLs(app, g),
      RegisterShow(app, g),  RegisterDiff(app, g), RegisterArtifacts(app, g), RegisterVerify(app, g), RegisterReproduce(app, g), RegisterExport(app, g),    RegisterLogs(app, g),    RegisterCompare(app, g), RegisterTensorboard(app, g), RegisterWhy(app, g), RegisterInit(app, g),
      RegisterReport(app, g),
      RegisterGpu(app, g),
      RegisterCancel(app, g), RegisterRetry(app, g), RegisterRm(app, g), RegisterGc(app, g), RegisterPriority(app, g), RegisterTop(app, g), RegisterAlerts(app, g), RegisterPlan(app, g), RegisterAsk(app, g),
      RegisterMcp(app, g),   RegisterServe(app, g), RegisterSim(app, g), RegisterDaemon(app, g), RegisterAudit(app, g), RegisterUsage(app, g), RegisterToken(app, g), RegisterStores(app, g)};
  // An unknown command gets a suggestion instead of CLI11's "a subcommand is required".
  std::vector<std::string> names;
  for (const auto& c : commands) names.push_back(c.app->get_name());
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--store") {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-') continue;
    if (std::find(names.begin(), names.end(), a) != names.end()) break;
    auto close = ClosestMatch(a, names);
    std::fprintf(stderr, "drover: unknown command '%s'; %scommands: %s (drover --help)\n",
                 a.c_str(), close ? ("did you mean '" + *close + "'? ").c_str() : "",
                 Join(names, ", ").c_str());
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }
  // Diagnostics and alerts go to stderr, so stdout stays the command's output (tables, --json).
  auto logger = spdlog::stderr_color_mt("drover");
  spdlog::set_default_logger(logger);
  SetLogPattern(g.verbose ? "[%H:%M:%S.%e] %^%l%$: %v" : "drover: %^%l%$: %v");
  spdlog::set_level(g.verbose ? spdlog::level::debug : spdlog::level::warn);
  for (auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return kExitBadInput;
}

}  // namespace drover::cli

#include "cli/cli.h"

#include <spdlog/spdlog.h>

#include "cli/common.h"
#include "drover_version.h"

namespace drover::cli {

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

  std::vector<Command> commands = {RegisterRun(app, g), RegisterLs(app, g), RegisterShow(app, g),
                                   RegisterLogs(app, g), RegisterCompare(app, g)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }
  spdlog::set_level(g.verbose ? spdlog::level::debug : spdlog::level::warn);
  for (auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return kExitBadInput;
}

}  // namespace drover::cli

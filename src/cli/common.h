#pragma once
// What every command shares: the store location, opening it, the exit codes, tables.
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/run.h"
#include "store/store.h"

namespace drover::cli {

// Exit statuses: 0 all good, 1 some run failed or was cancelled, 2 bad input (spec, flags, ids),
// 3 an internal or store error, 130 interrupted by Ctrl-C.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRunsFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInternal = 3;
inline constexpr int kExitInterrupted = 130;

struct Globals {
  std::string store_dir;  // --store, else $DROVER_HOME, else ./.drover, else the user's default
  bool verbose = false;
};

// A registered subcommand: its parser and what to do when it was chosen.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// --store, else $DROVER_HOME, else ./.drover when it exists, else the user's default store
// (cli/stores.h; said once on stderr), else ./.drover.
std::string StoreDir(const Globals& g);
// Why StoreDir chose it, in words ("--store", "DROVER_HOME", "./.drover", "the default in FILE").
std::string StoreWhy(const Globals& g);
std::string StorePath(const Globals& g);  // <store>/drover.db
// The store location must be a folder (or not exist yet).
Status CheckStoreDir(const Globals& g);
// Opens an existing store; `create` also makes a new one.
Result<std::unique_ptr<Store>> OpenStore(const Globals& g, bool create);

// Prints "drover: <message>" to stderr and returns the exit code for the status.
int ReportError(const Status& st);

Result<int64_t> ParseRunId(const std::string& text);
Result<Run> LoadRun(Store& store, const std::string& id_text);
Result<Experiment> LoadExperiment(Store& store, const std::string& id_or_name);

// The parameters that differ between runs of one set (for compact listings).
std::vector<std::string> VaryingParams(const std::vector<Run>& runs);
std::string ParamsSummary(const Json& params, const std::vector<std::string>& keys);
// "batch_size=64 grad_accum=8": the values of `params` that differ from `base`.
std::string ParamsDiff(const Json& base, const Json& params);
std::string FormatValue(const Json& v);  // 0.9611 / 64 / mlp
std::string FormatTime(Millis ms);       // local "2026-11-30 12:00:01"

// Prints `text` to stdout as TerminalText shows it (common/terminal.h): what a run or a request
// stored (names, hyper-parameters, failure lines, paths) is shown, never obeyed by the terminal.
// Every view prints stored text through this or RenderTable.
void PrintText(std::string_view text);
// Sets every logger's line pattern (spdlog's flags), with %v, the message, escaped as TerminalLine:
// a note, an alert or a file name a run chose reaches a log someone tails (the daemon's log, its
// journal) as text, never as escape sequences for their terminal.
void SetLogPattern(const std::string& pattern);
// A plain text table: columns padded to the widest cell; each cell escaped as TerminalLine.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);


Command RegisterRun(CLI::App& root, Globals& g);
Command RegisterPlan(CLI::App& root, Globals& g);
Command RegisterAsk(CLI::App& root, Globals& g);
Command RegisterMcp(CLI::App& root, Globals& g);
Command RegisterLs(CLI::App& root, Globals& g);
Command RegisterShow(CLI::App& root, Globals& g);
Command RegisterDiff(CLI::App& root, Globals& g);
Command RegisterArtifacts(CLI::App& root, Globals& g);
Command RegisterVerify(CLI::App& root, Globals& g);
Command RegisterReproduce(CLI::App& root, Globals& g);
Command RegisterExport(CLI::App& root, Globals& g);
Command RegisterLogs(CLI::App& root, Globals& g);
Command RegisterCompare(CLI::App& root, Globals& g);
Command RegisterTensorboard(CLI::App& root, Globals& g);
Command RegisterWhy(CLI::App& root, Globals& g);
Command RegisterInit(CLI::App& root, Globals& g);
Command RegisterReport(CLI::App& root, Globals& g);
Command RegisterServe(CLI::App& root, Globals& g);
Command RegisterSubmit(CLI::App& root, Globals& g);
Command RegisterCancel(CLI::App& root, Globals& g);
Command RegisterRetry(CLI::App& root, Globals& g);
Command RegisterRm(CLI::App& root, Globals& g);
Command RegisterGc(CLI::App& root, Globals& g);
Command RegisterPriority(CLI::App& root, Globals& g);
Command RegisterTop(CLI::App& root, Globals& g);
Command RegisterAlerts(CLI::App& root, Globals& g);
Command RegisterDaemon(CLI::App& root, Globals& g);
Command RegisterAudit(CLI::App& root, Globals& g);
Command RegisterUsage(CLI::App& root, Globals& g);
Command RegisterToken(CLI::App& root, Globals& g);
Command RegisterStores(CLI::App& root, Globals& g);
Command RegisterSim(CLI::App& root, Globals& g);

}  // namespace drover::cli

#include "cli/common.h"

#include "container/runtime.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <fmt/format.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "cli/stores.h"
#include "common/terminal.h"
#include "report/comparison.h"

namespace drover::cli {

namespace {

// The user's default store, when this folder has none of its own and nothing names one; said
// once per process on stderr (a command that uses it must not surprise).
std::optional<std::string> DefaultStoreHere() {
  std::error_code ec;
  if (std::filesystem::exists(".drover", ec)) return std::nullopt;
  static const std::optional<std::string> chosen = [] () -> std::optional<std::string> {
    auto def = UserDefaultStore();
    if (!def.ok()) {
      std::fprintf(stderr, "drover: warning: %s; using ./.drover\n",
                   TerminalText(def.status().message()).c_str());
      return std::nullopt;
    }
    if (*def) {
      std::fprintf(stderr, "drover: store %s (the default in %s; this folder has no .drover)\n",
                   TerminalText(**def).c_str(), UserConfigPath().c_str());
    }
    return *def;
  }();
  return chosen;
}

}  // namespace

std::string StoreWhy(const Globals& g) {
  if (!g.store_dir.empty()) return "--store";
  if (const char* home = std::getenv("DROVER_HOME"); home && *home) return "DROVER_HOME";
  if (DefaultStoreHere()) return "the default in " + UserConfigPath();
  return "./.drover of this folder";
}

std::string StoreDir(const Globals& g) {
  std::string dir = ".drover";
  if (!g.store_dir.empty()) {
    dir = g.store_dir;
  } else if (const char* home = std::getenv("DROVER_HOME"); home && *home) {
    dir = home;
  } else if (std::optional<std::string> def = DefaultStoreHere()) {
    dir = *def;
  }
  // Paths recorded in the store (logs, working copies) must not depend on where drover ran.
  std::error_code ec;
  auto abs = std::filesystem::absolute(dir, ec);
  return ec ? dir : abs.lexically_normal().string();
}

std::string StorePath(const Globals& g) { return StoreDir(g) + "/drover.db"; }

Status CheckStoreDir(const Globals& g) {
  std::string dir = StoreDir(g);
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return InvalidArgument(fmt::format(
        "the store {} is a file, not a folder; point --store (or DROVER_HOME) at a folder: drover "
        "keeps drover.db, snapshots/ and runs/ in it",
        dir));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Store>> OpenStore(const Globals& g, bool create) {
  DROVER_RETURN_IF_ERROR(CheckStoreDir(g));
  std::string path = StorePath(g);
  if (!create && !std::filesystem::exists(path)) {
    return NotFound(
        fmt::format("no drover store at {}; run `drover run SPEC` here first, or point --store (or "
                    "DROVER_HOME) at the folder that holds drover.db",
                    StoreDir(g)));
  }
  const bool fresh = !std::filesystem::exists(path);
  auto store = Store::Open(path);
  if (!store.ok()) return store.status();
  // A new store has started no container: it is not listed for strays at each start. It joins
  // the user's list of stores (drover stores).
  if (fresh) {
    container::MarkNoContainers(StoreDir(g));
    RememberStore(StoreDir(g));
  }
  return std::move(store).value();
}

int ReportError(const Status& st) {
  // An error may quote what a run or a request held (a name, a path): shown, never obeyed.
  std::fprintf(stderr, "drover: %s\n", TerminalText(st.message()).c_str());
  switch (st.code()) {
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kFailedPrecondition:
    case Code::kUnavailable:
    case Code::kPermissionDenied:
      return kExitBadInput;
    case Code::kCancelled:
      return kExitInterrupted;
    default:
      return kExitInternal;
  }
}

Result<int64_t> ParseRunId(const std::string& text) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v <= 0) {
    return InvalidArgument(
        fmt::format("'{}' is not a run id; run ids are numbers, as `drover ls` lists them", text));
  }
  return static_cast<int64_t>(v);
}

Result<Run> LoadRun(Store& store, const std::string& id_text) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseRunId(id_text));
  DROVER_ASSIGN_OR_RETURN(auto run, store.GetRun(id));
  if (!run) return NotFound(fmt::format("no run {} in this store; `drover ls` lists runs", id));
  return *run;
}

Result<Experiment> LoadExperiment(Store& store, const std::string& id_or_name) {
  DROVER_ASSIGN_OR_RETURN(auto exp, store.FindExperiment(id_or_name));
  if (!exp) {
    return NotFound(fmt::format(
        "no experiment '{}' in this store; `drover ls --experiments` lists them", id_or_name));
  }
  return *exp;
}

// Both live in report/ with the ranking that uses them.
std::vector<std::string> VaryingParams(const std::vector<Run>& runs) {
  return report::VaryingParams(runs);
}

std::string FormatValue(const Json& v) { return report::FormatValue(v); }

std::string ParamsDiff(const Json& base, const Json& params) {
  std::string out;
  for (auto it = params.begin(); it != params.end(); ++it) {
    if (base.contains(it.key()) && base[it.key()] == it.value()) continue;
    if (!out.empty()) out += " ";
    out += it.key() + "=" + FormatValue(it.value());
  }
  return out.empty() ? "(as submitted)" : out;
}

std::string ParamsSummary(const Json& params, const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) {
    if (!params.contains(k)) continue;
    if (!out.empty()) out += " ";
    out += k + "=" + FormatValue(params[k]);
  }
  return out;
}

std::string FormatTime(Millis ms) {
  if (ms <= 0) return "-";
  time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

void PrintText(std::string_view text) { std::fputs(TerminalText(text).c_str(), stdout); }

namespace {
// spdlog's %v with the message escaped.
class EscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string safe = TerminalLine(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(safe.data(), safe.data() + safe.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessage>();
  }
};
}  // namespace

void SetLogPattern(const std::string& pattern) {
  std::string escaped;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'v') {
      escaped += "%*";
      ++i;
    } else {
      escaped += pattern[i];
    }
  }
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<EscapedMessage>('*').set_pattern(escaped);
  spdlog::set_formatter(std::move(formatter));
}

std::string RenderTable(const std::vector<std::string>& given_header,
                        const std::vector<std::vector<std::string>>& given_rows) {
  // Every cell is one line of text as a terminal shows it: a name or a message with an escape
  // sequence or a newline in it can neither act on the terminal nor break the table.
  auto safe = [](const std::vector<std::string>& row) {
    std::vector<std::string> out;
    out.reserve(row.size());
    for (const auto& cell : row) out.push_back(TerminalLine(cell));
    return out;
  };
  const std::vector<std::string> header = safe(given_header);
  std::vector<std::vector<std::string>> rows;
  rows.reserve(given_rows.size());
  for (const auto& r : given_rows) rows.push_back(safe(r));
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (size_t i = 0; i < width.size(); ++i) {
      std::string cell = i < row.size() ? row[i] : "";
      if (i + 1 == width.size()) {
        out += cell;
      } else {
        out += cell + std::string(width[i] - cell.size() + 2, ' ');
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& r : rows) out += line(r);
  return out;
}

}  // namespace drover::cli

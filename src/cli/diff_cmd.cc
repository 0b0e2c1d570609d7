// drover diff RUN1 RUN2: what differs between two runs, to tell why their results differ:
// parameters, the command, the code (a unified diff of the two snapshots), the interpreter's
// packages, the host and GPUs, and the spec's environment variables (docs/cli.md).
#include <fmt/format.h>
#include <sys/stat.h>

#include <map>
#include <set>

#include "cli/catalog.h"
#include "cli/common.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "protocol/api.h"

namespace drover::cli {
namespace {

struct DiffFlags {
  std::string a, b;
  bool json = false;
  int64_t max_code_lines = 2000;
};

// "name==version" lines as name -> version.
std::map<std::string, std::string> Packages(const std::string& list) {
  std::map<std::string, std::string> out;
  for (const std::string& line : Split(list, '\n')) {
    if (line.empty()) continue;
    const size_t eq = line.find("==");
    out[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 2);
  }
  return out;
}

// The environment recorded for the interpreter of a run's last attempt (or the first recorded).
const Environment* EnvOf(const protocol::RunDetail& d) {
  const bool shell = d.experiment.spec.is_object() && d.experiment.spec.value("shell", false);
  const std::string interpreter =
      d.attempts.empty() ? std::string() : InterpreterOf(d.attempts.back().argv, shell);
  for (const Environment& e : d.environments) {
    if (e.interpreter == interpreter) return &e;
  }
  return d.environments.empty() ? nullptr : &d.environments.front();
}

std::string CommandOf(const protocol::RunDetail& d) {
  if (d.attempts.empty()) return "(never started)";
  std::vector<std::string> quoted;
  for (const auto& w : d.attempts.back().argv) quoted.push_back(ShellQuote(w));
  return Join(quoted, " ");
}

// A unified diff of two snapshot folders (git diff --no-index), paths shown as a/ and b/.
Result<std::string> CodeDiff(const Snapshot& a, const Snapshot& b, int64_t max_lines) {
  for (const Snapshot* s : {&a, &b}) {
    struct stat st;
    if (s->path.empty() || stat(s->path.c_str(), &st) != 0) {
      return NotFound(fmt::format("snapshot {} is no longer in the store (drover gc?)",
                                  s->hash.substr(0, 16)));
    }
  }
  CaptureOptions o;
  o.timeout_ms = 60'000;
  o.max_output_bytes = 16LL * 1024 * 1024;
  o.unset_env = {"GIT_DIR", "GIT_WORK_TREE"};
  DROVER_ASSIGN_OR_RETURN(
      Captured c, RunAndCapture({"git", "-c", "core.quotepath=off", "diff", "--no-index",
                                 "--no-color", "--src-prefix=a/", "--dst-prefix=b/", a.path, b.path},
                                o));
  if (c.exit_code != 0 && c.exit_code != 1) {
    return Status(Code::kIo, fmt::format("git diff of the snapshots failed (exit {})", c.exit_code));
  }
  // Paths read as the workdir's: the snapshot folders' own prefixes go.
  std::string text = c.out;
  for (const Snapshot* s : {&a, &b}) {
    std::string prefix = s->path;
    if (!prefix.empty() && prefix[0] == '/') prefix.erase(0, 1);
    size_t at = 0;
    while ((at = text.find(prefix + "/", at)) != std::string::npos) text.erase(at, prefix.size() + 1);
  }
  const std::vector<std::string> lines = Split(text, '\n');
  if (static_cast<int64_t>(lines.size()) > max_lines) {
    std::string cut;
    for (int64_t i = 0; i < max_lines; ++i) cut += std::string(lines[static_cast<size_t>(i)]) + "\n";
    cut += fmt::format("... {} more lines (--max-code-lines)\n",
                       static_cast<int64_t>(lines.size()) - max_lines);
    return cut;
  }
  return text;
}

int Diff(Globals& g, const DiffFlags& f) {
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  std::vector<protocol::RunDetail> runs;
  for (const std::string& which : {f.a, f.b}) {
    auto id = ParseRunId(which);
    if (!id.ok()) return ReportError(id.status());
    auto detail = (*catalog)->GetRunDetail(*id);
    if (!detail.ok()) return ReportError(detail.status());
    // A cached run did not run: the command (and interpreter) compared are its source's.
    if (detail->attempts.empty() && detail->run.cached_from != 0) {
      auto source = (*catalog)->GetRunDetail(detail->run.cached_from);
      if (source.ok()) detail->attempts = source->attempts;
    }
    runs.push_back(std::move(*detail));
  }
  const protocol::RunDetail& A = runs[0];
  const protocol::RunDetail& B = runs[1];
  Json out = {{"runs", {A.run.id, B.run.id}}};

  // Parameters: every key of either, the differing ones.
  Json params = Json::object();
  std::set<std::string> keys;
  for (const Json* p : {&A.run.params, &B.run.params}) {
    for (auto it = p->begin(); it != p->end(); ++it) keys.insert(it.key());
  }
  for (const std::string& k : keys) {
    const Json va = A.run.params.contains(k) ? A.run.params[k] : Json();
    const Json vb = B.run.params.contains(k) ? B.run.params[k] : Json();
    if (va != vb) params[k] = {va, vb};
  }
  out["params"] = params;
  out["command"] = {CommandOf(A), CommandOf(B)};
  if (A.run.stage != B.run.stage) out["stage"] = {A.run.stage, B.run.stage};
  if (A.run.cached_from != 0 || B.run.cached_from != 0) {
    out["cached_from"] = {A.run.cached_from ? Json(A.run.cached_from) : Json(nullptr),
                          B.run.cached_from ? Json(B.run.cached_from) : Json(nullptr)};
  }

  // Code.
  Json code = Json::object();
  std::string code_text;
  if (A.snapshot && B.snapshot) {
    code["snapshots"] = {A.snapshot->hash, B.snapshot->hash};
    code["git_commits"] = {A.experiment.git_commit, B.experiment.git_commit};
    if (A.snapshot->hash == B.snapshot->hash) {
      code["same"] = true;
    } else {
      code["same"] = false;
      auto diff = CodeDiff(*A.snapshot, *B.snapshot, f.max_code_lines);
      if (diff.ok()) {
        code_text = *diff;
        code["diff"] = *diff;
      } else {
        code["error"] = diff.status().message();
      }
    }
  }
  out["code"] = code;
  // The image each ran in (pinned at submit): the packages below are the image's.
  const std::string ca = DescribeContainer(A.experiment.spec);
  const std::string cb = DescribeContainer(B.experiment.spec);
  out["container"] = {ca.empty() ? Json(nullptr) : Json(ca), cb.empty() ? Json(nullptr) : Json(cb)};

  // Interpreter, packages, host, GPUs.
  const Environment* ea = EnvOf(A);
  const Environment* eb = EnvOf(B);
  Json env = Json::object();
  std::vector<std::string> package_lines;
  if (ea && eb) {
    for (const auto& [name, a, b] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"interpreter", ea->interpreter, eb->interpreter},
             {"host", ea->hostname, eb->hostname},
             {"gpus", ea->gpu_info, eb->gpu_info}}) {
      if (a != b) env[name] = {a, b};
    }
    const auto pa = Packages(ea->packages), pb = Packages(eb->packages);
    Json packages = Json::object();
    for (const auto& [name, version] : pa) {
      auto it = pb.find(name);
      if (it == pb.end()) {
        packages[name] = {version, nullptr};
        package_lines.push_back(fmt::format("- {}=={}", name, version));
      } else if (it->second != version) {
        packages[name] = {version, it->second};
        package_lines.push_back(fmt::format("  {} {} -> {}", name, version, it->second));
      }
    }
    for (const auto& [name, version] : pb) {
      if (!pa.count(name)) {
        packages[name] = {nullptr, version};
        package_lines.push_back(fmt::format("+ {}=={}", name, version));
      }
    }
    env["packages"] = packages;
    env["package_count"] = {pa.size(), pb.size()};
  }
  // The spec's environment variables.
  Json vars = Json::object();
  auto spec_env = [](const protocol::RunDetail& d) {
    const Json& s = d.experiment.spec;
    return s.is_object() && s.contains("env") && s["env"].is_object() ? s["env"] : Json::object();
  };
  const Json va = spec_env(A), vb = spec_env(B);
  for (const Json* m : {&va, &vb}) {
    for (auto it = m->begin(); it != m->end(); ++it) {
      const Json x = va.contains(it.key()) ? va[it.key()] : Json();
      const Json y = vb.contains(it.key()) ? vb[it.key()] : Json();
      if (x != y) vars[it.key()] = {x, y};
    }
  }
  env["vars"] = vars;
  out["environment"] = env;

  if (f.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::string text = fmt::format("run {} ({} {}) against run {} ({} {})\n", A.run.id,
                                 A.experiment.name, ToString(A.run.state), B.run.id,
                                 B.experiment.name, ToString(B.run.state));
  if (params.empty()) {
    text += "params       the same\n";
  } else {
    for (auto it = params.begin(); it != params.end(); ++it) {
      auto show = [](const Json& v) { return v.is_null() ? std::string("(none)") : FormatValue(v); };
      text += fmt::format("params       {}: {} -> {}\n", it.key(), show(it.value()[0]),
                          show(it.value()[1]));
    }
  }
  if (A.run.stage != B.run.stage) {
    auto show = [](const std::string& st) { return st.empty() ? std::string("(none)") : st; };
    text += fmt::format("stage        {} -> {}\n", show(A.run.stage), show(B.run.stage));
  }
  for (const protocol::RunDetail* d : {&A, &B}) {
    if (d->run.cached_from != 0) {
      text += fmt::format("cached       run {} was cached from run {} (its command and results)\n",
                          d->run.id, d->run.cached_from);
    }
  }
  if (CommandOf(A) == CommandOf(B)) {
    text += "command      the same\n";
  } else {
    text += fmt::format("command      {}\n          -> {}\n", CommandOf(A), CommandOf(B));
  }
  if (!A.snapshot || !B.snapshot) {
    text += "code         not recorded for both\n";
  } else if (A.snapshot->hash == B.snapshot->hash) {
    text += fmt::format("code         the same (snapshot {})\n", A.snapshot->hash.substr(0, 16));
  } else {
    text += fmt::format("code         snapshot {} -> {}", A.snapshot->hash.substr(0, 16),
                        B.snapshot->hash.substr(0, 16));
    if (!A.experiment.git_commit.empty() || !B.experiment.git_commit.empty()) {
      text += fmt::format(" (git {} -> {})", A.experiment.git_commit.substr(0, 12),
                          B.experiment.git_commit.substr(0, 12));
    }
    text += "\n";
    if (code.contains("error")) {
      text += "             " + code["error"].get<std::string>() + "\n";
    } else {
      text += code_text;
      if (!code_text.empty() && code_text.back() != '\n') text += "\n";
    }
  }
  if (!ca.empty() || !cb.empty()) {
    auto show = [](const std::string& c) { return c.empty() ? std::string("(host)") : c; };
    text += ca == cb ? fmt::format("container    the same ({})\n", ca)
                     : fmt::format("container    {}\n          -> {}\n", show(ca), show(cb));
  }
  if (!ea || !eb) {
    text += "environment  not recorded for both\n";
  } else {
    for (const char* name : {"interpreter", "host"}) {
      text += fmt::format("{:<13}{}\n", name,
                          env.contains(name)
                              ? fmt::format("{} -> {}", env[name][0].get<std::string>(),
                                            env[name][1].get<std::string>())
                              : "the same");
    }
    text += fmt::format("gpus         {}\n", env.contains("gpus") ? "differ (drover show each run)"
                                                                 : "the same");
    if (package_lines.empty()) {
      text += fmt::format("packages     the same ({})\n", Packages(ea->packages).size());
    } else {
      text += fmt::format("packages     {} differ\n", package_lines.size());
      for (const std::string& l : package_lines) text += "             " + l + "\n";
    }
  }
  if (vars.empty()) {
    text += "env vars     the same\n";
  } else {
    for (auto it = vars.begin(); it != vars.end(); ++it) {
      text += fmt::format("env vars     {}: {} -> {}\n", it.key(), it.value()[0].dump(),
                          it.value()[1].dump());
    }
  }
  PrintText(text);  // parameters, metric names and env values are the runs' own text
  return kExitOk;
}

}  // namespace

Command RegisterDiff(CLI::App& root, Globals& g) {
  auto f = std::make_shared<DiffFlags>();
  CLI::App* app = root.add_subcommand(
      "diff", "What differs between two runs: params, command, code, packages, host, env");
  app->add_option("run1", f->a, "The first run's id")->required();
  app->add_option("run2", f->b, "The second run's id")->required();
  app->add_flag("--json", f->json, "Print JSON");
  app->add_option("--max-code-lines", f->max_code_lines,
                  "The most lines of the code diff shown (default 2000)")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  return {app, [&g, f] { return Diff(g, *f); }};
}

}  // namespace drover::cli

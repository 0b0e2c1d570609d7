// drover export RUN -o FILE.tar.gz: a run's stored outputs (a trained model) with its full
// reproducibility record, in one archive another machine can read without drover
// (docs/pipelines.md, "Export" gives the layout).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/common.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "exec/artifacts.h"
#include "protocol/json_codec.h"
#include "store/store.h"

namespace drover::cli {
namespace {

namespace fs = std::filesystem;

struct ExportFlags {
  std::string run;
  std::string out;
  bool code = true;
};

Status Write(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return Status(Code::kIo, "cannot write '" + path.string() + "'");
  return Status::Ok();
}

Status Export(Globals& g, const ExportFlags& f) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseRunId(f.run));
  if (!f.out.ends_with(".tar.gz") && !f.out.ends_with(".tgz")) {
    return InvalidArgument("-o names a .tar.gz (or .tgz) file, got '" + f.out + "'");
  }
  DROVER_ASSIGN_OR_RETURN(auto store, OpenStore(g, false));
  DROVER_ASSIGN_OR_RETURN(std::optional<Run> run, store->GetRun(id));
  if (!run) return NotFound(fmt::format("no run {} in this store; `drover ls` lists runs", id));
  DROVER_ASSIGN_OR_RETURN(std::optional<Experiment> exp, store->GetExperiment(run->experiment_id));
  if (!exp) return Internal(fmt::format("run {} has no experiment", id));
  DROVER_ASSIGN_OR_RETURN(std::optional<Snapshot> snap, store->GetSnapshot(exp->snapshot_hash));
  DROVER_ASSIGN_OR_RETURN(std::vector<Attempt> attempts, store->ListAttempts(id));
  // A cached run did not run: its command is the one of the run it was cached from.
  std::vector<Attempt> source_attempts;
  if (attempts.empty() && run->cached_from != 0) {
    DROVER_ASSIGN_OR_RETURN(source_attempts, store->ListAttempts(run->cached_from));
  }
  const std::vector<Attempt>& ran = attempts.empty() ? source_attempts : attempts;
  DROVER_ASSIGN_OR_RETURN(std::vector<Environment> envs, store->ListEnvironments(exp->id));
  DROVER_ASSIGN_OR_RETURN(RunArtifacts arts, store->RunOutputs(id, store->Dir()));

  // Staged beside nothing of the store's: a temp folder, archived, removed.
  std::string tmp = (fs::temp_directory_path() / "drover-export-XXXXXX").string();
  if (mkdtemp(tmp.data()) == nullptr) return ErrnoStatus("cannot create a temp folder");
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{tmp};
  const std::string top = fmt::format("run-{}", id);
  const fs::path root = fs::path(tmp) / top;
  std::error_code ec;
  fs::create_directories(root / "artifacts", ec);
  if (ec) return Status(Code::kIo, "cannot create '" + root.string() + "': " + ec.message());

  Json record;
  record["format"] = "drover-export/1";
  record["run"] = protocol::ToJson(*run);
  record["experiment"] = {{"id", exp->id}, {"name", exp->name}, {"spec", exp->spec},
                          {"git_commit", exp->git_commit}, {"git_dirty", !exp->git_diff.empty()}};
  record["snapshot"] = snap ? Json{{"hash", snap->hash}, {"files", snap->files}, {"bytes", snap->bytes}}
                            : Json(nullptr);
  Json atts = Json::array();
  for (const Attempt& a : attempts) atts.push_back(protocol::ToJson(a));
  record["attempts"] = atts;
  Json env = Json::array();
  for (const Environment& e : envs) {
    env.push_back({{"interpreter", e.interpreter}, {"hostname", e.hostname}, {"gpu_info", e.gpu_info},
                   {"packages_file", "packages" + std::string(envs.size() > 1 ? "-" + std::to_string(env.size()) : "") + ".txt"}});
    DROVER_RETURN_IF_ERROR(Write(root / env.back()["packages_file"].get<std::string>(), e.packages));
  }
  record["environments"] = env;
  record["artifacts"] = protocol::ToJson(arts)["files"];
  if (!ran.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& w : ran.back().argv) quoted.push_back(ShellQuote(w));
    record["command"] = Join(quoted, " ");
    if (attempts.empty()) record["command_of_run"] = run->cached_from;
  }
  record["reproduce"] = fmt::format(
      "drover reproduce {} (in the store it came from); elsewhere: unpack code/, install "
      "packages.txt, run `command` in code/ with `run.params`",
      id);
  DROVER_RETURN_IF_ERROR(Write(root / "record.json", record.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"));
  if (!exp->git_diff.empty()) DROVER_RETURN_IF_ERROR(Write(root / "git.diff", exp->git_diff));

  // The outputs as the run stored them (links kept), and the code it ran.
  for (const Artifact& a : arts.files) {
    const fs::path dest = root / "artifacts" / a.path;
    fs::create_directories(dest.parent_path(), ec);
    fs::copy(arts.dir + "/" + a.path, dest, fs::copy_options::copy_symlinks, ec);
    if (ec) return Status(Code::kIo, "cannot copy artifact '" + a.path + "': " + ec.message());
  }
  if (f.code && snap && fs::is_directory(snap->path, ec)) {
    fs::copy(snap->path, root / "code", fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
    if (ec) return Status(Code::kIo, "cannot copy the code snapshot: " + ec.message());
  }
  const std::string out = fs::absolute(f.out).string();
  DROVER_ASSIGN_OR_RETURN(Captured tar, RunAndCapture({"tar", "-C", tmp, "-czf", out, top}));
  if (tar.exit_code != 0) {
    return Status(Code::kIo, fmt::format("tar could not write '{}' (exit {})", out, tar.exit_code));
  }
  std::printf("%s: run %lld with %zu artifact%s%s and its record (tar tzf %s lists it)\n",
              out.c_str(), static_cast<long long>(id), arts.files.size(),
              arts.files.size() == 1 ? "" : "s", f.code ? ", its code" : "", out.c_str());
  return Status::Ok();
}

}  // namespace

Command RegisterExport(CLI::App& root, Globals& g) {
  auto f = std::make_shared<ExportFlags>();
  CLI::App* app = root.add_subcommand(
      "export", "Package a run's stored outputs with its reproducibility record (.tar.gz)");
  app->add_option("run", f->run, "The run's id")->required();
  app->add_option("-o,--output", f->out, "The archive to write (FILE.tar.gz)")->required();
  app->add_flag("!--no-code", f->code, "Leave the code snapshot out");
  return {app, [&g, f] {
            Status st = Export(g, *f);
            return st.ok() ? kExitOk : ReportError(st);
          }};
}

}  // namespace drover::cli

#include "engine/run_export.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/strings.h"
#include "common/subprocess.h"
#include "exec/artifacts.h"
#include "protocol/json_codec.h"

namespace drover {
namespace {

namespace fs = std::filesystem;

Status Write(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return Status(Code::kIo, "cannot write '" + path.string() + "'");
  return Status::Ok();
}

}  // namespace

Result<ExportResult> ExportRun(Store& store, int64_t id, const std::string& out,
                               const ExportOptions& options) {
  DROVER_ASSIGN_OR_RETURN(std::optional<Run> run, store.GetRun(id));
  if (!run) return NotFound(fmt::format("no run {} in this store; `drover ls` lists runs", id));
  DROVER_ASSIGN_OR_RETURN(std::optional<Experiment> exp, store.GetExperiment(run->experiment_id));
  if (!exp) return Internal(fmt::format("run {} has no experiment", id));
  DROVER_ASSIGN_OR_RETURN(std::optional<Snapshot> snap, store.GetSnapshot(exp->snapshot_hash));
  DROVER_ASSIGN_OR_RETURN(std::vector<Attempt> attempts, store.ListAttempts(id));
  // A cached run did not run: its command is the one of the run it was cached from.
  std::vector<Attempt> source_attempts;
  if (attempts.empty() && run->cached_from != 0) {
    DROVER_ASSIGN_OR_RETURN(source_attempts, store.ListAttempts(run->cached_from));
  }
  const std::vector<Attempt>& ran = attempts.empty() ? source_attempts : attempts;
  DROVER_ASSIGN_OR_RETURN(std::vector<Environment> envs, store.ListEnvironments(exp->id));
  DROVER_ASSIGN_OR_RETURN(RunArtifacts arts, store.RunOutputs(id, store.Dir()));

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
  if (ec) return IoStatus("cannot create '" + root.string() + "'", ec);

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
    if (a.mode == 0120777) {
      // A link, kept as its text (read from the outputs tree, the daemon's own).
      const fs::path target = fs::read_symlink(arts.dir + "/" + a.path, ec);
      if (!ec) fs::create_symlink(target, dest, ec);
    } else {
      fs::copy_file(ArtifactObject(store.Dir(), a.hash), dest, ec);
    }
    if (ec) return IoStatus("cannot copy artifact '" + a.path + "'", ec);
  }
  // The archive: the staged record and artifacts, and the code straight from the snapshot
  // (under run-N/code/). A user's snapshot is read by tar running as that user, never with the
  // daemon's rights (a file of theirs swapped for a link to what they may not read is not read
  // for them); what is staged is theirs to read anyway, so it is handed to them first.
  const bool as_owner = options.code_owner != nullptr && ::geteuid() == 0 &&
                        options.code_owner->uid > 0;
  if (as_owner) {
    for (fs::recursive_directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
      (void)!lchown(it->path().c_str(), static_cast<uid_t>(options.code_owner->uid),
                    static_cast<gid_t>(options.code_owner->gid));
    }
    (void)!lchown(tmp.c_str(), static_cast<uid_t>(options.code_owner->uid),
                  static_cast<gid_t>(options.code_owner->gid));
  }
  std::vector<std::string> argv = {"tar", "-C", tmp, "-czf", out, top};
  if (options.code && snap && fs::is_directory(snap->path, ec)) {
    argv.insert(argv.end(), {"--transform", "s,^\\.,run-" + std::to_string(id) + "/code,S",
                             "-C", snap->path, "."});
  }
  if (as_owner) argv = AsUserArgv(*options.code_owner, std::move(argv));
  DROVER_ASSIGN_OR_RETURN(Captured tar, RunAndCapture(argv));
  if (tar.exit_code != 0) {
    return Status(Code::kIo, fmt::format("tar could not write '{}' (exit {})", out,
                                         tar.exit_code));
  }
  ExportResult r;
  r.artifacts = arts.files.size();
  return r;
}

}  // namespace drover

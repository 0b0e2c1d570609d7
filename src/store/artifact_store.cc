// Pipelines' records: the outputs runs stored (artifacts) and earlier successes by fingerprint.
#include <fmt/format.h>

#include "store/sqlite_stmt.h"
#include "store/store.h"

namespace drover {

using store::Stmt;

Status Store::PutArtifacts(const std::vector<Artifact>& artifacts) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("INSERT OR REPLACE INTO artifacts (run_id, path, hash, bytes, mode) "
                          "VALUES (?, ?, ?, ?, ?)",
                          "storing a run's artifacts"));
  for (const Artifact& a : artifacts) {
    st.Reset();
    st.Bind(a.run_id, a.path, a.hash, a.bytes, a.mode);
    DROVER_RETURN_IF_ERROR(st.Run());
  }
  return Status::Ok();
}

Result<std::vector<Artifact>> Store::ListArtifacts(int64_t run_id) {
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT run_id, path, hash, bytes, mode FROM artifacts WHERE run_id = ? "
                          "ORDER BY path",
                          "reading a run's artifacts"));
  st.Bind(run_id);
  std::vector<Artifact> out;
  for (;;) {
    DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    Artifact a;
    a.run_id = st.Int(0);
    a.path = st.Text(1);
    a.hash = st.Text(2);
    a.bytes = st.Int(3);
    a.mode = static_cast<int>(st.Int(4));
    out.push_back(std::move(a));
  }
  return out;
}

std::string Store::Dir() const {
  const char* file = sqlite3_db_filename(impl_->db, "main");
  if (file == nullptr || *file == 0) return "";
  std::string path(file);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

Result<RunArtifacts> Store::RunOutputs(int64_t run_id, const std::string& store_dir) {
  DROVER_ASSIGN_OR_RETURN(std::optional<Run> run, GetRun(run_id));
  if (!run) return NotFound(fmt::format("no run {} in this store; `drover ls` lists runs", run_id));
  RunArtifacts out;
  out.run_id = run_id;
  out.source_run = run->cached_from ? run->cached_from : run->id;
  out.dir = fmt::format("{}/outputs/{}", store_dir, out.source_run);
  DROVER_ASSIGN_OR_RETURN(out.files, ListArtifacts(out.source_run));
  return out;
}

Result<std::optional<Run>> Store::LatestSuccess(const std::string& fingerprint, int64_t except,
                                                const std::string& user) {
  if (fingerprint.empty()) return std::optional<Run>();
  DROVER_ASSIGN_OR_RETURN(
      Stmt st, impl_->Use("SELECT id FROM runs WHERE fingerprint = ? AND state = 'succeeded' "
                          "AND id != ? AND experiment_id IN (SELECT id FROM experiments WHERE "
                          "user = ?) ORDER BY id DESC LIMIT 1",
                          "looking for an earlier success"));
  st.Bind(fingerprint, except, user);
  DROVER_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<Run>();
  const int64_t id = st.Int(0);
  return GetRun(id);
}

}  // namespace drover

// drover export RUN -o FILE.tar.gz: a run's stored outputs (a trained model) with its full
// reproducibility record, in one archive another machine can read without drover
// (docs/pipelines.md, "Export" gives the layout).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "cli/client.h"
#include "cli/common.h"
#include "cli/unix_http.h"
#include "engine/run_export.h"
#include "protocol/api.h"
#include "store/store.h"

namespace drover::cli {
namespace {

namespace fs = std::filesystem;

struct ExportFlags {
  std::string run;
  std::string out;
  bool code = true;
};

// The daemon's archive of run `id` (GET /runs/{id}/export), written to `out` by this process as
// its user: through a temp file beside it, renamed into place once every byte the daemon said it
// would send has arrived. Returns how many artifacts the archive holds (unknown here: 0).
Result<size_t> DownloadExport(const DaemonInfo& daemon, int64_t id, bool code,
                              const std::string& out) {
  if (daemon.socket.empty()) {
    return Unavailable("this store's daemon has no socket to export through; run drover export "
                       "on the daemon's machine");
  }
  const std::string tmp = out + ".part";
  FILE* f = std::fopen(tmp.c_str(), "wbx");
  if (f == nullptr) return ErrnoStatus("cannot write '" + tmp + "'");
  int64_t got = 0;
  bool written = true;
  std::string headers;
  Status st = UnixHttpStream(
      daemon.socket, fmt::format("{}/runs/{}/export?code={}", protocol::kApiPrefix, id, code ? 1 : 0),
      [&](std::string_view data) {
        written = std::fwrite(data.data(), 1, data.size(), f) == data.size();
        got += static_cast<int64_t>(data.size());
        return written;
      },
      600, &headers);
  written = std::fclose(f) == 0 && written;
  int64_t length = -1;
  if (size_t at = [&] {
        std::string lower = headers;
        for (auto& c : lower) c = static_cast<char>(std::tolower(c));
        return lower.find("\r\ncontent-length:");
      }();
      at != std::string::npos) {
    length = std::atoll(headers.c_str() + at + 17);
  }
  if (!st.ok() || !written || length < 0 || got != length) {
    std::remove(tmp.c_str());
    if (!st.ok()) return st;
    if (!written) return ErrnoStatus("cannot write '" + tmp + "'");
    return Unavailable(fmt::format("the archive of run {} was cut short ({} of {} bytes); try again",
                                   id, got, length));
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) {
    Status err = ErrnoStatus("cannot write '" + out + "'");
    std::remove(tmp.c_str());
    return err;
  }
  return size_t{0};
}

Status Export(Globals& g, const ExportFlags& f) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseRunId(f.run));
  if (!f.out.ends_with(".tar.gz") && !f.out.ends_with(".tgz")) {
    return InvalidArgument("-o names a .tar.gz (or .tgz) file, got '" + f.out + "'");
  }
  const std::string out = fs::absolute(f.out).string();
  size_t artifacts = 0;
  bool artifacts_known = true;
  if (auto daemon = FindDaemon(g)) {
    // The daemon writes the archive (GET /runs/{id}/export: a shared daemon's store is its own);
    // this process, as the user, writes it where they asked.
    DROVER_ASSIGN_OR_RETURN(artifacts, DownloadExport(*daemon, id, f.code, out));
    artifacts_known = false;
  } else {
    DROVER_ASSIGN_OR_RETURN(auto store, OpenStore(g, false));
    ExportOptions options;
    options.code = f.code;
    DROVER_ASSIGN_OR_RETURN(ExportResult r, ExportRun(*store, id, out, options));
    artifacts = r.artifacts;
  }
  if (artifacts_known) {
    std::printf("%s: run %lld with %zu artifact%s%s and its record (tar tzf %s lists it)\n",
                out.c_str(), static_cast<long long>(id), artifacts, artifacts == 1 ? "" : "s",
                f.code ? ", its code" : "", out.c_str());
  } else {
    std::printf("%s: run %lld's artifacts%s and its record (tar tzf %s lists it)\n", out.c_str(),
                static_cast<long long>(id), f.code ? ", its code" : "", out.c_str());
  }
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

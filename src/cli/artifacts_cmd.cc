// drover artifacts RUN: the outputs a pipeline stage stored (docs/pipelines.md): each file's
// path, size, content hash and where it is in the store; a run cached from another shows that
// run's. --json for tools.
#include <fmt/format.h>

#include "cli/catalog.h"
#include "cli/common.h"
#include "common/strings.h"
#include "protocol/json_codec.h"

namespace drover::cli {
namespace {

struct ArtifactsFlags {
  std::string run;
  bool json = false;
};

int Artifacts(Globals& g, const ArtifactsFlags& f) {
  auto id = ParseRunId(f.run);
  if (!id.ok()) return ReportError(id.status());
  auto catalog = OpenCatalog(g);
  if (!catalog.ok()) return ReportError(catalog.status());
  auto a = (*catalog)->RunOutputs(*id);
  if (!a.ok()) return ReportError(a.status());
  if (f.json) {
    std::fputs((protocol::ToJson(*a).dump(2, ' ', false, Json::error_handler_t::replace) + "\n").c_str(), stdout);
    return kExitOk;
  }
  if (a->files.empty()) {
    std::fputs(fmt::format("run {} stored no outputs: only a pipeline stage that declares "
                           "outputs: stores them, when it succeeds (docs/pipelines.md)\n",
                           *id)
                   .c_str(),
               stdout);
    return kExitOk;
  }
  std::string head = fmt::format("run {}: {} file{} in {}", *id, a->files.size(),
                                 a->files.size() == 1 ? "" : "s", a->dir);
  if (a->source_run != *id) head += fmt::format(" (cached from run {})", a->source_run);
  std::vector<std::vector<std::string>> rows;
  int64_t total = 0;
  for (const Artifact& x : a->files) {
    rows.push_back({x.path, x.mode == 0120777 ? "link" : FormatBytes(x.bytes), x.hash.substr(0, 16)});
    total += x.bytes;
  }
  std::string out = head + "\n\n" + RenderTable({"path", "size", "sha256"}, rows);
  out += fmt::format("\n{} in all\n", FormatBytes(total));
  PrintText(out);  // paths a run wrote: shown, never obeyed
  return kExitOk;
}

}  // namespace

Command RegisterArtifacts(CLI::App& root, Globals& g) {
  auto f = std::make_shared<ArtifactsFlags>();
  CLI::App* app = root.add_subcommand(
      "artifacts", "The outputs a pipeline stage's run stored: paths, sizes, content hashes");
  app->add_option("run", f->run, "The run's id")->required();
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return Artifacts(g, *f); }};
}

}  // namespace drover::cli

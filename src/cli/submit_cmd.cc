// drover submit SPEC: queue an experiment in the daemon and print its id at once.
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "cli/client.h"
#include "cli/common.h"
#include "common/strings.h"
#include "cli/follow.h"
#include "cli/run_flags.h"
#include "protocol/api.h"
#include "spec/spec_parser.h"

namespace drover::cli {

Result<protocol::SubmitResponse> SubmitToDaemon(ApiClient& api, const std::string& spec_path,
                                                const std::vector<std::string>& sets) {
  DROVER_ASSIGN_OR_RETURN(protocol::SubmitRequest req, SubmitRequestFor(spec_path, sets));
  DROVER_ASSIGN_OR_RETURN(Json j, api.Post("/experiments", protocol::ToJson(req)));
  return protocol::SubmitResponseFromJson(j);
}

Status CheckWithDaemon(ApiClient& api, const std::string& spec_path,
                       const std::vector<std::string>& sets) {
  DROVER_ASSIGN_OR_RETURN(protocol::SubmitRequest req, SubmitRequestFor(spec_path, sets));
  return api.Post("/experiments/check", protocol::ToJson(req)).status();
}

Result<protocol::SubmitRequest> SubmitRequestFor(const std::string& spec_path,
                                                 const std::vector<std::string>& sets) {
  DROVER_ASSIGN_OR_RETURN(std::string text, ReadSpecFile(spec_path));
  protocol::SubmitRequest req;
  req.spec_yaml = std::move(text);
  std::error_code ec;
  if (spec_path == kSpecFromStdin) {
    req.spec_name = "<stdin>";
    req.base_dir = std::filesystem::current_path(ec).string();
  } else {
    req.spec_name = spec_path;
    req.base_dir =
        std::filesystem::absolute(spec_path, ec).parent_path().lexically_normal().string();
  }
  req.overrides = sets;
  return req;
}

namespace {

struct SubmitFlags {
  std::string spec_path;
  std::vector<std::string> sets;
  std::vector<std::string> force;
  bool rerun = false;
  bool json = false;
};

int Submit(Globals& g, const SubmitFlags& f) {
  auto daemon = FindDaemon(g);
  if (!daemon) {
    return ReportError(FailedPrecondition(fmt::format(
        "no drover daemon serves the store {}; start one with `drover serve`, or run the spec in "
        "the foreground with `drover run {}`",
        StoreDir(g), f.spec_path)));
  }
  ApiClient api(*daemon);
  std::vector<std::string> sets = f.sets;
  ApplyCacheOptions(f.force, f.rerun, sets);
  auto r = SubmitToDaemon(api, f.spec_path, sets);
  if (!r.ok()) return ReportError(r.status());
  for (const std::string& note : r->notes) std::fprintf(stderr, "drover: note: %s\n", note.c_str());
  if (f.json) {
    std::printf("%s\n", protocol::ToJson(*r).dump(2).c_str());
  } else {
    std::printf("%lld\n", static_cast<long long>(r->experiment_id));
    std::fprintf(stderr, "queued experiment %lld with %s; follow it with drover ls -e %lld\n",
                 static_cast<long long>(r->experiment_id),
                 Count(static_cast<int64_t>(r->run_ids.size()), "run").c_str(),
                 static_cast<long long>(r->experiment_id));
  }
  return kExitOk;
}

}  // namespace

Command RegisterSubmit(CLI::App& root, Globals& g) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* app = root.add_subcommand(
      "submit", "Queue an experiment in the daemon (drover serve) and print its id at once");
  app->add_option("spec", f->spec_path, "The experiment spec (YAML)")->required();
  app->add_option("--set", f->sets, "Override a spec value: key=value; repeatable");
  app->add_flag("--json", f->json, "Print the experiment and run ids as JSON");
  AddCacheOptions(app, &f->force, &f->rerun);
  return {app, [&g, f] { return Submit(g, *f); }};
}

}  // namespace drover::cli

// drover stores: the stores this user has on this machine (each store drover created is listed
// in $XDG_STATE_HOME/drover/stores), which one this folder uses and why, each one's daemon and
// experiments. cli/stores.h says how the default store is chosen.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "cli/client.h"
#include "cli/common.h"
#include "cli/stores.h"
#include "common/strings.h"
#include "store/store.h"

namespace drover::cli {
namespace {

struct StoresFlags {
  bool json = false;
};

int StoresCmd(Globals& g, const StoresFlags& f) {
  const std::string here = StoreDir(g);
  std::vector<std::string> stores = KnownStores();
  if (std::find(stores.begin(), stores.end(), here) == stores.end()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(here + "/drover.db", ec)) stores.insert(stores.begin(), here);
  }
  Json out = Json::array();
  std::vector<std::vector<std::string>> rows;
  for (const std::string& dir : stores) {
    Globals at = g;
    at.store_dir = dir;
    const std::optional<DaemonInfo> daemon = FindDaemon(at);
    int64_t experiments = -1;
    if (auto store = Store::Open(dir + "/drover.db"); store.ok()) {
      if (auto list = (*store)->ListExperiments(); list.ok()) {
        experiments = static_cast<int64_t>(list->size());
      }
    }
    const std::string served =
        daemon ? fmt::format("pid {} at {}:{}", daemon->pid, daemon->host, daemon->port) : "none";
    out.push_back({{"path", dir},
                   {"this_folder", dir == here},
                   {"experiments", experiments >= 0 ? Json(experiments) : Json()},
                   {"daemon", daemon ? Json{{"pid", daemon->pid},
                                            {"url", fmt::format("http://{}:{}", daemon->host,
                                                                daemon->port)}}
                                     : Json()}});
    rows.push_back({dir == here ? "*" : "", dir,
                    experiments >= 0 ? std::to_string(experiments) : "?", served});
  }
  if (f.json) {
    std::printf("%s\n", Json{{"stores", out}, {"this_folder", here}, {"why", StoreWhy(g)}}.dump(2).c_str());
    return kExitOk;
  }
  std::printf("this folder uses %s (%s)\n", here.c_str(), StoreWhy(g).c_str());
  if (rows.empty()) {
    std::printf("no store yet: drover run SPEC makes one here (%s)\n", here.c_str());
    return kExitOk;
  }
  std::fputs(RenderTable({"", "store", "experiments", "daemon"}, rows).c_str(), stdout);
  std::printf("set one default for every folder without a .drover: store: PATH in %s\n",
              UserConfigPath().empty() ? "~/.config/drover/config.yaml" : UserConfigPath().c_str());
  return kExitOk;
}

}  // namespace

Command RegisterStores(CLI::App& root, Globals& g) {
  auto f = std::make_shared<StoresFlags>();
  CLI::App* app = root.add_subcommand(
      "stores", "The stores this user has on this machine: which one this folder uses and why, "
                "each one's daemon and experiments");
  app->add_flag("--json", f->json, "Print JSON");
  return {app, [&g, f] { return StoresCmd(g, *f); }};
}

}  // namespace drover::cli

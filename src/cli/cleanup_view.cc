#include "cli/cleanup_view.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "common/strings.h"
#include "engine/cleanup.h"
#include "protocol/api.h"
#include "store/engine_lock.h"

namespace drover::cli {

Result<Cleanup> CleanUpHere(const Globals& g, const PlanStep& plan, bool dry_run) {
  DROVER_RETURN_IF_ERROR(CheckStoreDir(g));
  DROVER_ASSIGN_OR_RETURN(auto lock, EngineLock::Acquire(StoreDir(g)));
  DROVER_ASSIGN_OR_RETURN(auto store, OpenStore(g, /*create=*/false));
  DROVER_ASSIGN_OR_RETURN(Cleanup c, plan(*store, StoreDir(g)));
  if (dry_run) {
    MeasureCleanup(c);
    return c;
  }
  DROVER_RETURN_IF_ERROR(ApplyCleanup(*store, StoreDir(g), c));
  MeasureCleanup(c);
  DROVER_RETURN_IF_ERROR(EmptyTrash(StoreDir(g)));
  return c;
}

void PrintCleanup(const Cleanup& c, const std::string& headline, bool json) {
  if (json) {
    std::printf("%s\n", protocol::ToJson(c).dump(2).c_str());
    return;
  }
  std::printf("%s\n", headline.c_str());
  constexpr size_t kShown = 20;
  for (size_t i = 0; i < c.files.size() && i < kShown; ++i) {
    const DiskItem& f = c.files[i];
    std::printf("  %9s  %s  (%s)\n", FormatBytes(f.bytes).c_str(), f.path.c_str(), f.why.c_str());
  }
  if (c.files.size() > kShown) {
    std::printf("  ... and %zu more (--json lists them all)\n", c.files.size() - kShown);
  }
  std::printf("%s%s of files%s\n", c.applied ? "deleted: " : "would delete: ",
              FormatBytes(c.Bytes()).c_str(),
              c.applied ? "" : " (dry run: nothing was deleted)");
  std::fflush(stdout);
}

Result<bool> Confirm(const std::string& question, bool yes) {
  if (yes) return true;
  if (!::isatty(STDIN_FILENO)) {
    return FailedPrecondition(question + " Add --yes to go ahead without a terminal to ask on "
                                         "(--dry-run shows what would go)");
  }
  std::printf("%s [y/N] ", question.c_str());
  std::fflush(stdout);
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes";
}

}  // namespace drover::cli

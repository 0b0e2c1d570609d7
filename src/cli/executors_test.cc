// The registry of executors (cli/executors.h): every kind has its name both ways, and every kind
// but this machine's has a factory.
#include "cli/executors.h"

#include <gtest/gtest.h>

namespace drover::cli {
namespace {

TEST(Executors, EveryKindIsNamedBothWaysAndRegistered) {
  std::vector<std::string> names = ExecutorKindNames();
  ASSERT_EQ(names.size(), std::size(kAllExecutorKinds));
  for (ExecutorKind k : kAllExecutorKinds) {
    SCOPED_TRACE(std::string(ToString(k)));
    EXPECT_EQ(ParseExecutorKind(ToString(k)), k);
    const ExecutorEntry entry = ExecutorOf(k);
    EXPECT_EQ(entry.make == nullptr, k == ExecutorKind::kLocal);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"local", "slurm"}));
  EXPECT_FALSE(ParseExecutorKind("kubernetes").has_value());
  EXPECT_EQ(ExecutorOf(ExecutorKind::kSlurm).would_accept != nullptr, true);
}

}  // namespace
}  // namespace drover::cli

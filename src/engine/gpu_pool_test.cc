// The GPU pool on its own: the probe's GPUs less the reserve, starts and ends in the book, and
// two pools over one real lease folder (two engines of different stores on one machine) that
// never hand out the same whole GPU.
#include "engine/gpu_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace drover {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

class GpuPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/drover-gpu-pool-test-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    probe_ = std::make_unique<FakeGpuProbe>(ParseFakeGpus("2x16GiB").value());
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  sched::PendingRun GpuRun(int64_t id) {
    sched::PendingRun p;
    p.run_id = p.seq = id;
    p.resources = Resources{1, 0, 1};
    return p;
  }

  std::string root_;
  std::unique_ptr<FakeGpuProbe> probe_;
};

TEST_F(GpuPoolTest, TheGpusLessTheReserveAndWhatRunsHoldOfThem) {
  GpuPool pool(nullptr, 1 * kGiB, /*placed=*/false);
  ASSERT_TRUE(pool.Init(*probe_, {}).ok());
  ASSERT_EQ(pool.gpus().size(), 2u);
  EXPECT_EQ(pool.gpus()[0].capacity, 15 * kGiB);
  sched::StartAction a{7, {1}, 4 * kGiB, false};
  pool.Apply(a, 2);
  EXPECT_EQ(pool.gpus()[1].reserved, 4 * kGiB);
  EXPECT_EQ(pool.cpu_slots_used(), 2);
  pool.Release(a, 2);
  EXPECT_EQ(pool.gpus()[1].reserved, 0);
  EXPECT_EQ(pool.cpu_slots_used(), 0);
  EXPECT_FALSE(pool.leased());  // no ledger: nothing to publish
  EXPECT_TRUE(pool.Publish({{{1}, 0, true, 0}}));
}

TEST_F(GpuPoolTest, AnExecutorThatPlacesAttemptsLeavesThePoolEmpty) {
  GpuPool pool(nullptr, 0, /*placed=*/true);
  ASSERT_TRUE(pool.Init(*probe_, {}).ok());
  EXPECT_TRUE(pool.gpus().empty());
  EXPECT_TRUE(pool.devices().empty());
}

TEST_F(GpuPoolTest, TwoPoolsOverOneLeaseFolderSeeWhatTheOtherHolds) {
  auto ledger_a = FileGpuLedger::Open(root_ + "/leases", "aaaa");
  auto ledger_b = FileGpuLedger::Open(root_ + "/leases", "bbbb");
  ASSERT_TRUE(ledger_a.ok() && ledger_b.ok());
  GpuPool a(ledger_a->get(), 0, false), b(ledger_b->get(), 0, false);
  ASSERT_TRUE(a.Init(*probe_, {}).ok());
  ASSERT_TRUE(b.Init(*probe_, {}).ok());
  // A holds GPU 0 whole.
  std::vector<GpuHold> held_by_a = {{{0}, 0, true, 123}};
  ASSERT_TRUE(a.Publish(held_by_a));

  std::vector<sched::PendingRun> queue = {GpuRun(1)};
  sched::ClusterView view;
  view.gpus = b.gpus();
  ASSERT_TRUE(b.TakeForeignLeases(queue, view, 0, [] { return std::vector<GpuHold>{}; }));
  b.Unlock();
  EXPECT_TRUE(view.gpus[0].exclusive);
  EXPECT_EQ(view.gpus[0].reserved, view.gpus[0].capacity);
  EXPECT_EQ(view.gpus[1].reserved, 0);
  EXPECT_EQ(queue.size(), 1u);

  // A queue that needs no GPU does not take the machine's lock at all.
  std::vector<sched::PendingRun> cpu_only = {GpuRun(2)};
  cpu_only[0].resources.gpus = 0;
  sched::ClusterView view2;
  view2.gpus = b.gpus();
  EXPECT_FALSE(b.TakeForeignLeases(cpu_only, view2, 0, [] { return std::vector<GpuHold>{}; }));
  EXPECT_EQ(view2.gpus[0].reserved, 0);
}

TEST_F(GpuPoolTest, WhileTheLockIsHeldElsewhereGpuRunsWaitThisPass) {
  auto ledger_a = FileGpuLedger::Open(root_ + "/leases", "aaaa");
  auto ledger_b = FileGpuLedger::Open(root_ + "/leases", "bbbb");
  ASSERT_TRUE(ledger_a.ok() && ledger_b.ok());
  GpuPool b(ledger_b->get(), 0, false);
  ASSERT_TRUE(b.Init(*probe_, {}).ok());
  ASSERT_TRUE((*ledger_a)->Lock(500).ok());  // another engine deciding, for longer than 500 ms
  std::vector<sched::PendingRun> queue = {GpuRun(1), GpuRun(2)};
  queue[1].resources.gpus = 0;
  sched::ClusterView view;
  view.gpus = b.gpus();
  EXPECT_FALSE(b.TakeForeignLeases(queue, view, 0, [] { return std::vector<GpuHold>{}; }));
  ASSERT_EQ(queue.size(), 1u);  // the CPU run may still start
  EXPECT_EQ(queue[0].run_id, 2);
  (*ledger_a)->Unlock();
}

}  // namespace
}  // namespace drover

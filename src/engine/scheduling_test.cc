// Scheduling on its own, over a stand-in run table and real GPU pool, health and telemetry
// components with no engine: what a pass starts and where, a host that cannot start stops the
// pass, and drover why's reasons come from the same pass with explain on.
#include "engine/scheduling.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "engine/alert_desk.h"
#include "gpu/gpu_probe.h"
#include "testutil/loop_context.h"
#include "watch/watchers.h"

namespace drover {
namespace {

constexpr int64_t kGiB = 1024LL * 1024 * 1024;

// The engine's part: what a pass asked it to start and to stop.
class Host : public SchedulingHost {
 public:
  bool Start(LiveRun& live, const sched::StartAction& action, Instant) override {
    if (refuse) return false;
    started[live.run.id] = action.gpus;
    return true;
  }
  void Preempt(LiveRun& live, const std::string&, Instant) override {
    preempted.push_back(live.run.id);
  }
  bool refuse = false;
  std::map<int64_t, std::vector<int>> started;
  std::vector<int64_t> preempted;
};

class SchedulingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "scheduling_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = std::move(Store::Open(":memory:").value());
    ctx_ = std::make_unique<testing::LoopContext>(*store_);
    ASSERT_TRUE(pool_.Init(probe_, {}).ok());
    health_ = std::make_unique<HealthWatch>(*ctx_, dir_ + "/gpu-drain.json");
    alerts_ = std::make_unique<AlertDesk>(*ctx_, options_.watch,
                                          [](int64_t) -> const Experiment* { return nullptr; });
    sampler_ = std::make_unique<TelemetrySampler>(*ctx_, probe_, options_.watch, *health_,
                                                  watchers_, *alerts_);
    options_.cpu_slots = 8;
    scheduling_ = std::make_unique<Scheduling>(
        options_, /*placed_by_executor=*/false,
        SchedulingInputs{live_, experiments_, queue_, pool_, *health_, *sampler_}, host_);
    auto exp = std::make_unique<ExperimentEntry>();
    exp->experiment.id = 1;
    exp->spec.resources = Resources{1, 0, 1};  // one whole GPU, one CPU slot
    exp_ = exp.get();
    experiments_[1] = std::move(exp);
  }
  // A waiting run of the experiment, in the table and the queue's class for it.
  void AddWaiting(int64_t id) {
    auto live = std::make_unique<LiveRun>();
    live->exp = exp_;
    live->run.id = id;
    live->run.experiment_id = 1;
    live->run.resources = exp_->spec.resources;
    live->run.created_ms = 100;
    queue_.Wait(id, WaitClass{1, 0, 100, 0});
    live_[id] = std::move(live);
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<testing::LoopContext> ctx_;
  EngineOptions options_;
  FakeGpuProbe probe_{{{0, "GPU-0", "Fake", 16 * kGiB, 0}, {1, "GPU-1", "Fake", 16 * kGiB, 0}}};
  GpuPool pool_{nullptr, 0, false};
  std::unique_ptr<HealthWatch> health_;
  watch::RunWatchers watchers_{options_.watch.detectors};
  std::unique_ptr<AlertDesk> alerts_;
  std::unique_ptr<TelemetrySampler> sampler_;
  std::map<int64_t, std::unique_ptr<LiveRun>> live_;
  std::map<int64_t, std::unique_ptr<ExperimentEntry>> experiments_;
  ExperimentEntry* exp_ = nullptr;
  RunQueue queue_;
  Host host_;
  std::unique_ptr<Scheduling> scheduling_;
};

TEST_F(SchedulingTest, APassStartsWhatFitsEachOnAGpuOfItsOwnAndExplainsTheRest) {
  for (int64_t id : {1, 2, 3}) AddWaiting(id);
  const Instant now{5000, 5000};
  scheduling_->Pass(now);
  ASSERT_EQ(host_.started.size(), 2u);
  ASSERT_TRUE(host_.started.count(1) && host_.started.count(2));
  EXPECT_EQ(host_.started[1].size(), 1u);
  EXPECT_NE(host_.started[1], host_.started[2]);  // whole GPUs: one each
  EXPECT_TRUE(host_.preempted.empty());

  // The engine would now hold those GPUs (its Start applies them to the pool): run 3 waits for one,
  // in the scheduler's own words, next to what the engine said of another run.
  for (int64_t id : {1, 2}) {
    pool_.Apply(sched::StartAction{id, host_.started[id], 0, true}, 1);
    queue_.Run(id);
    live_[id]->placement = sched::StartAction{id, host_.started[id], 0, true};
    live_[id]->attempt.emplace();
  }
  ASSERT_TRUE(scheduling_->ExplainDue(now));
  EXPECT_FALSE(scheduling_->ExplainDue(now));  // not again before kExplainEveryMs
  std::map<int64_t, protocol::WaitInfo> known = {{9, {"needs", "waiting for stage prep"}}};
  scheduling_->Explain(std::move(known), {live_.at(3).get()}, now);
  const auto three = scheduling_->waiting().Of(3);
  ASSERT_TRUE(three.has_value());
  EXPECT_NE(three->code, "not_scheduled");
  EXPECT_NE(three->reason.find("GPU"), std::string::npos) << three->reason;
  EXPECT_EQ(scheduling_->waiting().Of(9)->code, "needs");
  EXPECT_FALSE(scheduling_->waiting().Of(1).has_value());  // running: not waiting

  // Once a GPU is free again, the same explanation says the run can start.
  pool_.Release(sched::StartAction{1, host_.started[1], 0, true}, 1);
  scheduling_->Explain({}, {live_.at(3).get()}, now);
  EXPECT_EQ(scheduling_->waiting().Of(3)->code, "not_scheduled");
}

TEST_F(SchedulingTest, AStartTheHostCannotPrepareEndsThePass) {
  for (int64_t id : {1, 2}) AddWaiting(id);
  host_.refuse = true;
  scheduling_->Pass({5000, 5000});
  EXPECT_TRUE(host_.started.empty());
  host_.refuse = false;
  scheduling_->Pass({6000, 6000});
  EXPECT_EQ(host_.started.size(), 2u);
}

TEST_F(SchedulingTest, UnderAnExecutorThatPlacesAttemptsARunIsOneSlotAndNoGpu) {
  GpuPool placed(nullptr, 0, /*placed=*/true);
  ASSERT_TRUE(placed.Init(probe_, {}).ok());
  options_.cpu_slots = 1;  // executor.max_jobs 1
  Scheduling slurm(options_, /*placed_by_executor=*/true,
                   SchedulingInputs{live_, experiments_, queue_, placed, *health_, *sampler_},
                   host_);
  for (int64_t id : {1, 2}) AddWaiting(id);
  slurm.Pass({5000, 5000});
  ASSERT_EQ(host_.started.size(), 1u);  // one job slot
  EXPECT_TRUE(host_.started.begin()->second.empty());  // the executor places it, not drover
}

}  // namespace
}  // namespace drover

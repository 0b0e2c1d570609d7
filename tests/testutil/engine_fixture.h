#pragma once
// The engine tests' common ground: a fresh folder with a workdir (code/train.py), a real SQLite
// store in memory, a fake clock, and specs parsed against that workdir.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "spec/spec_parser.h"

namespace drover::testing {

class EngineFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("drover-engine-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "code");
    std::ofstream(root_ / "code" / "train.py") << "print('v1')\n";
    store_ = std::move(Store::Open(":memory:").value());
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  Spec ParseSpec(const std::string& yaml) {
    auto s = ParseSpecString(yaml, "test.yaml", (root_ / "code").string());
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.value();
  }

  // Options every engine test starts from: the store folder under root_, 8 CPU slots, a fixed
  // environment, no package capture, the run index checked at every pass, search proposals made
  // at once on the loop (deterministic with the fake clock; one test makes them on the thread).
  EngineOptions BaseOptions() const {
    EngineOptions o;
    o.store_dir = (root_ / "store").string();
    o.cpu_slots = 8;
    o.kill_grace_ms = 5000;
    o.base_env = {"PATH=/usr/bin:/bin", "HOME=/root"};
    o.capture_environment = false;
    o.check_index = true;
    o.proposals_off_loop = false;
    return o;
  }

  std::filesystem::path root_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
};

}  // namespace drover::testing

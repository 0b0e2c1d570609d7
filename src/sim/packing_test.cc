#include "sim/packing.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace drover::sim {
namespace {

constexpr int64_t kLots = 1'000'000;  // CPU and memory that never run out

TraceNode Node(int gpus, int64_t cpu = kLots, int64_t mem = kLots) {
  return {"n", cpu, mem, gpus, "T4"};
}

// A pod of `gpus` GPUs at `milli` each (1000 = whole GPUs).
TraceJob Pod(int64_t id, int gpus, int milli, int64_t cpu = 1000, int64_t mem = 1024) {
  TraceJob j;
  j.id = id;
  j.gpus = gpus;
  j.gpu_milli = milli;
  j.cpu_milli = cpu;
  j.memory_mib = mem;
  return j;
}

Placement At(int node, std::vector<int> gpus) { return {node, std::move(gpus)}; }

Placement MustChoose(const PackState& s, const TraceJob& pod, Packer p) {
  auto r = s.Choose(pod, p);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok() || !*r) {
    ADD_FAILURE() << ToString(p) << " placed nothing";
    return {-1, {}};
  }
  return **r;
}

TEST(Packing, PackerNames) {
  for (Packer p : AllPackers()) EXPECT_EQ(*ParsePacker(ToString(p)), p);
  auto bad = ParsePacker("worst-fit");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("first-fit, best-fit, drover or all"), std::string::npos);
}

// A whole GPU: first-fit takes the first node; best-fit the node with the least GPU capacity
// left; drover's scheduler the node with the fewest idle GPUs (it counts whole GPUs only).
TEST(Packing, WholeGpuGoesWhereEachPackerSays) {
  PackState s({Node(4), Node(4), Node(2)});
  // Node 1: three GPUs hold a 100-milli pod each (3,700 left, one idle GPU: 3).
  for (int g = 0; g < 3; ++g) s.Place(Pod(10 + g, 1, 100), At(1, {g}));
  TraceJob pod = Pod(1, 1, 1000);
  EXPECT_EQ(MustChoose(s, pod, Packer::kFirstFit), At(0, {0}));  // node 0: 4,000 left
  EXPECT_EQ(MustChoose(s, pod, Packer::kBestFit), At(2, {0}));   // node 2: 2,000 left, the least
  EXPECT_EQ(MustChoose(s, pod, Packer::kDrover), At(1, {3}));    // node 1: one idle GPU
}

// A share of a GPU: best-fit looks at nodes first (least left), drover's scheduler at GPUs only
// (the tightest share anywhere).
TEST(Packing, FractionalPodGoesWhereEachPackerSays) {
  PackState s({Node(2), Node(2), Node(2)});
  s.Place(Pod(10, 1, 400), At(0, {1}));  // node 0: [1000, 600]  1,600 left
  s.Place(Pod(11, 1, 480), At(1, {1}));  // node 1: [1000, 520]  1,520 left
  s.Place(Pod(12, 1, 300), At(2, {0}));  // node 2: [700, 0]       700 left
  s.Place(Pod(13, 1, 1000), At(2, {1}));
  TraceJob pod = Pod(1, 1, 500);
  EXPECT_EQ(MustChoose(s, pod, Packer::kFirstFit), At(0, {0}));
  EXPECT_EQ(MustChoose(s, pod, Packer::kBestFit), At(2, {0}));
  EXPECT_EQ(MustChoose(s, pod, Packer::kDrover), At(1, {1}));  // 520 left: the tightest GPU
}

TEST(Packing, CpuAndMemoryOfTheNodeAreHonoured) {
  // Node 0 has GPUs but too little CPU; node 1 too little memory; node 2 fits.
  PackState s({Node(2, 1000, kLots), Node(2, kLots, 512), Node(4)});
  TraceJob pod = Pod(1, 2, 1000, /*cpu=*/2000, /*mem=*/1024);
  for (Packer p : AllPackers()) EXPECT_EQ(MustChoose(s, pod, p), At(2, {0, 1})) << ToString(p);
  s.Place(pod, At(2, {0, 1}));
  EXPECT_EQ(s.cpu_free(2), kLots - 2000);
  EXPECT_EQ(s.memory_free(2), kLots - 1024);
  EXPECT_EQ(s.gpu_free(2, 1), 0);
  EXPECT_EQ(s.gpu_free_milli(), 8000 - 2000);
  // A gang never spans nodes: two idle GPUs, one on each node, do not make a place for two.
  PackState split({Node(1), Node(1)});
  for (Packer p : AllPackers()) {
    auto r = split.Choose(Pod(2, 2, 1000), p);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(*r) << ToString(p);
  }
}

// First-fit leaves 100 and 200 milli-GPUs on two GPUs and then cannot place a 300; best-fit and
// drover put the 200 on the 200 hole and place everything. The list is repeated, so they stop at
// the second 700 with the cluster full.
TEST(Packing, FillUntilTheFirstFailure) {
  std::vector<TraceNode> nodes = {Node(1), Node(1)};
  std::vector<TraceJob> pods = {Pod(1, 1, 700), Pod(2, 1, 800), Pod(3, 1, 200), Pod(4, 1, 300)};
  auto ff = Pack(pods, nodes, Packer::kFirstFit);
  ASSERT_TRUE(ff.ok());
  EXPECT_EQ(ff->pods_placed, 3);
  ASSERT_TRUE(ff->failed);
  EXPECT_EQ(ff->failed->id, 4);
  EXPECT_EQ(ff->gpu_capacity_milli, 2000);
  EXPECT_EQ(ff->gpu_allocated_milli, 1700);
  EXPECT_DOUBLE_EQ(ff->unallocated_share, 0.15);
  // FGD's fragmentation over the four shapes (a quarter each): the 700, 800 and 300 can use
  // neither hole (300 each), the 200 cannot use the 100 hole: (300 + 300 + 100 + 300) / 4 = 250.
  EXPECT_DOUBLE_EQ(ff->fragmented_share, 250.0 / 2000);
  for (Packer p : {Packer::kBestFit, Packer::kDrover}) {
    auto r = Pack(pods, nodes, p);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->pods_placed, 4) << ToString(p);
    ASSERT_TRUE(r->failed);
    EXPECT_EQ(r->failed->id, 1);
    EXPECT_DOUBLE_EQ(r->unallocated_share, 0);
    EXPECT_DOUBLE_EQ(r->fragmented_share, 0);
    auto once = Pack(pods, nodes, p, {.repeat = false});
    EXPECT_EQ(once->pods_placed, 4);
    EXPECT_FALSE(once->failed);
  }
}

// Drover's scheduler puts a fractional pod on the tightest GPU anywhere (here: the first of the
// two-GPU node, all being idle) and so breaks up the only place a two-GPU gang had; best-fit puts
// it on the one-GPU node (least capacity left).
TEST(Packing, SharingAGpuKeepsTheMachineAGangNeeds) {
  std::vector<TraceNode> nodes = {Node(2), Node(1)};
  std::vector<TraceJob> pods = {Pod(1, 1, 400), Pod(2, 2, 1000)};
  auto best = Pack(pods, nodes, Packer::kBestFit);
  auto drover = Pack(pods, nodes, Packer::kDrover);
  auto first = Pack(pods, nodes, Packer::kFirstFit);
  ASSERT_TRUE(best.ok() && drover.ok() && first.ok());
  // best-fit and drover (among equally free GPUs, the machine with the fewest idle ones): 400 on
  // node 1, the gang on node 0; again 400 on node 1 (600 left); the gang fails.
  for (const auto& r : {*best, *drover}) {
    EXPECT_EQ(r.pods_placed, 3) << ToString(r.packer);
    EXPECT_EQ(r.failed->id, 2);
    EXPECT_DOUBLE_EQ(r.unallocated_share, 200.0 / 3000);
  }
  // first-fit: 400 on node 0 breaks the only machine with two GPUs.
  EXPECT_EQ(first->pods_placed, 1);
  EXPECT_EQ(first->failed->id, 2);
  EXPECT_DOUBLE_EQ(first->unallocated_share, 2600.0 / 3000);
}

TEST(Packing, ShareOfSeveralGpusIsRefusedByDrover) {
  PackState s({Node(4)});
  auto r = s.Choose(Pod(7, 2, 500), Packer::kDrover);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pod 7 asks for 2 GPUs at 500"), std::string::npos);
  EXPECT_EQ(MustChoose(s, Pod(7, 2, 500), Packer::kBestFit), At(0, {0, 1}));
  EXPECT_FALSE(Pack({}, {}, Packer::kFirstFit).ok());
}

TEST(Packing, ShuffleIsFixedBySeedAndKeepsEveryPod) {
  std::vector<TraceJob> pods;
  for (int i = 1; i <= 50; ++i) pods.push_back(Pod(i, 1, 1000));
  auto a = Shuffled(pods, 3), b = Shuffled(pods, 3), c = Shuffled(pods, 4);
  auto ids = [](const std::vector<TraceJob>& v) {
    std::vector<int64_t> out;
    for (const auto& j : v) out.push_back(j.id);
    return out;
  };
  EXPECT_EQ(ids(a), ids(b));
  EXPECT_NE(ids(a), ids(c));
  EXPECT_NE(ids(a), ids(pods));
  auto sorted = ids(a);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, ids(pods));
}

TEST(Packing, SpreadOfValues) {
  Spread s = SpreadOf({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.sd, 1.2909944, 1e-6);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(SpreadOf({5}).sd, 0);
}

// The real openb trace, when the data is there: every packer fills the cluster to within a few
// per cent before the first failure.
TEST(Packing, OpenbTraceFillsMostOfTheCluster) {
  const std::string dir = std::string(DROVER_SOURCE_DIR) + "/../shared/data/traces";
  if (!std::filesystem::exists(dir + "/openb_pod_list_default.csv")) {
    GTEST_SKIP() << "no openb trace in " << dir;
  }
  auto pods = ReadOpenbPods(dir + "/openb_pod_list_default.csv");
  auto nodes = ReadOpenbNodes(dir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(pods.ok() && nodes.ok());
  for (Packer p : AllPackers()) {
    auto r = Pack(pods->jobs, *nodes, p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->gpu_capacity_milli, 6'212'000);
    ASSERT_TRUE(r->failed);
    EXPECT_GT(r->pods_placed, 5000) << ToString(p);
    EXPECT_LT(r->unallocated_share, 0.2) << ToString(p);
    EXPECT_LE(r->fragmented_share, r->unallocated_share);
  }
}

}  // namespace
}  // namespace drover::sim

// Progress evidence on the virtual cluster (issue 32): healthy jobs at every rhythm get no
// verdict, a loop with no pause gets no culprit, and a job whose every rank stalls in one
// collective when the fabric between the nodes fails is a transport stall. Real gloo ranks of
// tools/repro/parallel_job.py (vLLM's TP x PP groups, torchrun), real agents, real probes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "virtual_cluster.h"

namespace hangscope {
namespace {

using nlohmann::json;

// A healthy busy job: vLLM model steps (the DP batch sync, PP send/recv, TP all_reduce) back
// to back with `step_ms` of host work between them, on 2 nodes x 2 ranks (TP 2 x PP 2: each
// TP pair on one node, the PP pair across the nodes).
testing::ClusterOptions busy_job(const std::string& step_ms) {
  return {
      .nodes = 2,
      .ranks_per_node = 2,
      .job = "--launcher torchrun --layout tp=2,pp=2 --scenario busy-healthy --step-ms " + step_ms};
}

std::string top_verdict(const json& report) {
  const auto& verdicts = report["verdicts"];
  return verdicts.empty() ? "(none)"
                          : verdicts[0].value("id", "") + ": " + verdicts[0].value("summary", "");
}

// Each rhythm diagnosed twice: a false alarm in either run fails. The rhythm of a decode server
// (2-50 ms of host work per step) is where stopped samples alone caught a rank in its
// collective at every sample and called it waiting.
TEST(Progress, BusyHealthyJobsAtEveryRhythmGetNoVerdict) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  for (const std::string step_ms : {"2", "10", "20", "50"}) {
    SCOPED_TRACE("--step-ms " + step_ms);
    testing::VirtualCluster cluster(busy_job(step_ms));
    ASSERT_TRUE(cluster.up());
    for (int run = 0; run < 2; ++run) {
      const auto d = cluster.diagnose("bundle" + std::to_string(run), "--force");
      ASSERT_FALSE(d.report.is_null());
      std::cout << "[progress] step " << step_ms << " ms run " << run << ": exit " << d.exit_code
                << ", " << top_verdict(d.report) << std::endl;
      EXPECT_EQ(d.exit_code, 0) << d.report["conclusion"];
      EXPECT_TRUE(d.report["verdicts"].empty()) << d.report["verdicts"].dump(1);
      for (const auto& r : d.report["ranks"]) {
        // Every rank is seen progressing, by its stack, its probes or its sequence numbers.
        EXPECT_EQ(r["progressing"], true) << r.dump(1);
      }
    }
  }
}

// No pause at all: the ranks may stand in their collective at every sample and probe. Their
// groups' sequence numbers (read from memory on torch 1.13) still say they progress; never a
// culprit.
TEST(Progress, ALoopWithNoPauseGetsNoCulprit) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  testing::VirtualCluster cluster(busy_job("0"));
  ASSERT_TRUE(cluster.up());
  for (int run = 0; run < 2; ++run) {
    const auto d = cluster.diagnose("bundle" + std::to_string(run), "--force");
    ASSERT_FALSE(d.report.is_null());
    std::cout << "[progress] no pause run " << run << ": exit " << d.exit_code << ", "
              << top_verdict(d.report) << std::endl;
    EXPECT_EQ(d.exit_code, 0) << d.report["conclusion"];
    EXPECT_TRUE(d.report["verdicts"].empty()) << d.report["verdicts"].dump(1);
  }
}

// Every rank loops on the world all_reduce; then node 1's fabric link goes down (its agent
// still answers on the management network). Every rank ends in the same all_reduce, none
// completes it, no rank diverged: the transport is the suspect, exit 3.
TEST(Progress, EveryRankStalledInOneCollectiveIsATransportStall) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  testing::ClusterOptions options{
      .nodes = 2,
      .ranks_per_node = 2,
      .job = "--launcher torchrun --layout tp=2,pp=2 --scenario transport-stall --step-ms 5",
      .fabric = true};
  testing::VirtualCluster cluster(options);
  ASSERT_TRUE(cluster.up());
  {  // before the cut: healthy
    const auto d = cluster.diagnose("before");
    EXPECT_EQ(d.exit_code, 0) << top_verdict(d.report);
  }
  ASSERT_TRUE(cluster.cut(1));
  std::this_thread::sleep_for(std::chrono::seconds(1));  // every rank reaches the stalled step
  const auto d = cluster.diagnose("after");
  ASSERT_FALSE(d.report.is_null());
  std::cout << "[progress] transport stall: exit " << d.exit_code << ", " << top_verdict(d.report)
            << std::endl;
  EXPECT_EQ(d.exit_code, 3);
  ASSERT_FALSE(d.report["verdicts"].empty()) << d.report["conclusion"];
  const auto& top = d.report["verdicts"][0];
  EXPECT_EQ(top["id"], "collective-transport") << top.dump(1);
  EXPECT_TRUE(top["diverged_ranks"].empty()) << top.dump(1);
  EXPECT_EQ(top["waiting_ranks"], json::array({0, 1, 2, 3})) << top.dump(1);
  EXPECT_NE(top.value("summary", "").find("all_reduce"), std::string::npos) << top.dump(1);
  for (const auto& node : d.report["nodes"]) EXPECT_EQ(node["status"], "ok") << node.dump();
}

}  // namespace
}  // namespace hangscope

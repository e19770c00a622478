// End to end on the virtual cluster: 2 nodes x 2 real gloo ranks hung as each scenario of
// tools/repro/gloo_barrier_hang.py says, captured by real agents, diagnosed by the real
// binary. Each must give the right verdict and diverged rank; the loop of all-reduces none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "virtual_cluster.h"

namespace hangscope {
namespace {

using nlohmann::json;

const json* rank_entry(const json& report, int rank) {
  for (const auto& r : report["ranks"]) {
    if (r["rank"] == rank) return &r;
  }
  return nullptr;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string first_lines(const std::string& text, int count) {
  std::istringstream in(text);
  std::string line, out;
  for (int i = 0; i < count && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

// Brings up a scenario and diagnoses it; the verdict and diverged ranks every case checks.
struct Scenario {
  explicit Scenario(const std::string& name, int diverged = 3)
      : cluster({.nodes = 2, .ranks_per_node = 2, .diverged = diverged, .scenario = name}) {}
  testing::VirtualCluster cluster;
  testing::Diagnosis diagnosis;

  bool run() {
    if (!cluster.up()) return false;
    diagnosis = cluster.diagnose("bundle");
    return !diagnosis.report.is_null();
  }
  const json& report() const { return diagnosis.report; }
  void expect_verdict(const std::string& id, const json& diverged) const {
    ASSERT_FALSE(report()["verdicts"].empty()) << report()["conclusion"];
    const auto& top = report()["verdicts"][0];
    EXPECT_EQ(top["id"], id) << top.dump(1);
    EXPECT_EQ(top["diverged_ranks"], diverged) << top.dump(1);
    EXPECT_EQ(diagnosis.exit_code, 3);
  }
};

bool skip_without_root() {
  return ::geteuid() != 0;
}

TEST(Scenarios, CollectiveMismatch) {
  if (skip_without_root()) GTEST_SKIP() << "namespaces need root";
  Scenario s("collective-mismatch");
  ASSERT_TRUE(s.run());
  s.expect_verdict("collective-mismatch", json::array({3}));
  const auto* r3 = rank_entry(s.report(), 3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ((*r3)["wait_point"]["function"], "all_reduce");
  EXPECT_EQ((*r3)["wait_point"]["caller"]["function"], "sync_sequence_lengths");
  EXPECT_EQ((*rank_entry(s.report(), 0))["wait_point"]["function"], "barrier");
}

TEST(Scenarios, BusyRankIsAStragglerAndTheReportSaysSoFirst) {
  if (skip_without_root()) GTEST_SKIP() << "namespaces need root";
  Scenario s("busy");
  ASSERT_TRUE(s.run());
  s.expect_verdict("rank-straggler", json::array({3}));
  EXPECT_EQ(s.report()["verdicts"][0]["waiting_ranks"], json::array({0, 1, 2}));
  const auto* r3 = rank_entry(s.report(), 3);
  EXPECT_EQ((*r3)["state"], "running");
  EXPECT_EQ((*r3)["progressing"], true);
  for (int r : {0, 1, 2}) {
    EXPECT_EQ((*rank_entry(s.report(), r))["progressing"], false) << r;
    EXPECT_FALSE((*rank_entry(s.report(), r))["stuck_since"].is_null()) << r;
  }
  // Read cold, the first three lines of report.md name the rank, where it is and why.
  const auto head = first_lines(read_text(s.diagnosis.bundle + "/report.md"), 3);
  EXPECT_NE(head.find("Rank 3"), std::string::npos) << head;
  EXPECT_NE(head.find("works"), std::string::npos) << head;
  EXPECT_NE(head.find("slow_path"), std::string::npos) << head;  // compute_slow_path / step
  EXPECT_NE(head.find("ranks 0-2 wait for it in barrier"), std::string::npos) << head;
  EXPECT_NE(head.find("rank-straggler"), std::string::npos) << head;
  // The other renderings of the same bundle.
  const auto dot = read_text(s.diagnosis.bundle + "/tree.dot");
  EXPECT_NE(dot.find("digraph hangscope"), std::string::npos);
  EXPECT_NE(dot.find("#d62728"), std::string::npos);  // the diverged branch highlighted
  const auto folded = read_text(s.diagnosis.bundle + "/stacks.folded");
  EXPECT_NE(folded.find(";rank 3;"), std::string::npos);
  EXPECT_NE(folded.find("compute_slow_path"), std::string::npos);
  // `hangscope report BUNDLE` re-runs the analysis to the same verdict.
  const auto again = testing::run_command(std::string(HANGSCOPE_BINARY) + " report " +
                                          s.diagnosis.bundle + " --json");
  EXPECT_EQ(again.exit_code, 3);
  const auto replay = json::parse(again.out);
  EXPECT_EQ(replay["verdicts"][0]["id"], "rank-straggler");
  EXPECT_EQ(replay["verdicts"][0]["diverged_ranks"], json::array({3}));
}

TEST(Scenarios, StoppedRankStaysStopped) {
  if (skip_without_root()) GTEST_SKIP() << "namespaces need root";
  Scenario s("stopped");
  ASSERT_TRUE(s.run());
  s.expect_verdict("rank-stopped", json::array({3}));
  EXPECT_EQ((*rank_entry(s.report(), 3))["state"], "stopped");
  // hangscope found it stopped and left it stopped.
  const auto ps = testing::run_command(
      "ps -eo stat=,args= | grep -- '--scenario stopped' | "
      "grep -v grep | cut -c1");
  EXPECT_NE(ps.out.find('T'), std::string::npos) << ps.out;
}

TEST(Scenarios, ExitedRankIsMissingWhileTheOthersWaitInAStoreBarrier) {
  if (skip_without_root()) GTEST_SKIP() << "namespaces need root";
  Scenario s("store-exit");
  ASSERT_TRUE(s.run());
  s.expect_verdict("rank-dead", json::array({3}));
  EXPECT_EQ((*rank_entry(s.report(), 3))["state"], "missing");
  for (int r : {0, 1, 2}) {
    const auto& entry = *rank_entry(s.report(), r);
    EXPECT_EQ(entry["wait_point"]["kind"], "store") << r;
    EXPECT_EQ(entry["waits_for"], json::array({3})) << r;
    // The agents asked the store (on node 0, across the nodes' network) which keys exist.
    EXPECT_EQ(entry["facts"]["store.missing_keys"], "[\"arrive/3\"]") << r;
    EXPECT_NE(entry["waits_for_reason"].get<std::string>().find("(queried)"), std::string::npos);
  }
  const auto evidence = s.report()["verdicts"][0]["evidence"].dump();
  EXPECT_NE(evidence.find("3 of 4 awaited keys exist (prefix default_pg/); missing: arrive/3"),
            std::string::npos)
      << evidence;
}

TEST(Scenarios, UninterruptibleRank) {
  if (skip_without_root()) GTEST_SKIP() << "namespaces need root";
  Scenario s("uninterruptible");
  ASSERT_TRUE(s.run());
  s.expect_verdict("rank-uninterruptible", json::array({3}));
  EXPECT_EQ((*rank_entry(s.report(), 3))["state"], "uninterruptible");
  EXPECT_EQ((*rank_entry(s.report(), 3))["wait_point"]["function"], "spawn_compiler");
}

TEST(Scenarios, EveryRankProgressingIsNoDivergence) {
  if (skip_without_root()) GTEST_SKIP() << "namespaces need root";
  Scenario s("allreduce-loop");
  ASSERT_TRUE(s.run());
  EXPECT_TRUE(s.report()["verdicts"].empty()) << s.report()["verdicts"].dump(1);
  EXPECT_EQ(s.diagnosis.exit_code, 0);
  EXPECT_NE(s.report()["conclusion"].get<std::string>().find("No divergence"), std::string::npos);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ((*rank_entry(s.report(), r))["progressing"], true)
        << rank_entry(s.report(), r)->dump(1);
  }
  const auto head = first_lines(read_text(s.diagnosis.bundle + "/report.md"), 3);
  EXPECT_NE(head.find("no divergence found"), std::string::npos) << head;
}

TEST(Scenarios, PipelineGraphNamesTheStuckEarlyStageRank) {
  if (skip_without_root()) GTEST_SKIP() << "namespaces need root";
  // Stage 0 = ranks 0,1 (node0), stage 1 = ranks 2,3 (node1). Rank 1 is stuck in a lock and
  // never sends; rank 0 sent and waits in its stage's barrier; ranks 2,3 wait in recv.
  Scenario s("pipeline", 1);
  ASSERT_TRUE(s.run());
  s.expect_verdict("rank-diverged", json::array({1}));
  EXPECT_EQ(s.report()["verdicts"][0]["waiting_ranks"], json::array({0, 2, 3}));
  EXPECT_EQ((*rank_entry(s.report(), 3))["waits_for"], json::array({1}));  // recv src=1
  EXPECT_EQ((*rank_entry(s.report(), 2))["waits_for"], json::array({0}));  // recv src=0
  EXPECT_EQ((*rank_entry(s.report(), 0))["waits_for"], json::array({1}));  // stage barrier
  EXPECT_EQ((*rank_entry(s.report(), 1))["wait_point"]["kind"], "lock");
  EXPECT_EQ((*rank_entry(s.report(), 2))["pp"], 1);  // from the VLLM::Worker_PP1_TP0 title
}

TEST(Scenarios, FlightRecorderNamesTheRankOneCollectiveBehind) {
  if (skip_without_root()) GTEST_SKIP() << "namespaces need root";
  // Every rank loops on the same all_reduce; rank 3 stopped after #5, ranks 0-2 wait in #6.
  // The agents (--trigger-fr-dump) ask each rank's fifo for a dump; none exists before.
  Scenario s("collective-behind");
  ASSERT_TRUE(s.cluster.up());
  for (int node = 0; node < 2; ++node) {
    for (int rank = node * 2; rank < node * 2 + 2; ++rank) {
      EXPECT_NE(::access((s.cluster.dir() + "/node" + std::to_string(node) +
                          "/flight-recorder/nccl_trace_rank_" + std::to_string(rank))
                             .c_str(),
                         F_OK),
                0)
          << "a dump before anyone asked";
    }
  }
  ASSERT_TRUE(s.run());
  s.expect_verdict("collective-behind", json::array({3}));
  const auto& top = s.report()["verdicts"][0];
  EXPECT_EQ(top["waiting_ranks"], json::array({0, 1, 2}));
  EXPECT_NE(top["summary"].get<std::string>().find("wait in collective nccl:all_reduce #6"),
            std::string::npos)
      << top["summary"];
  const auto* r3 = rank_entry(s.report(), 3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ((*r3)["facts"]["flight_recorder.trigger"], "requested");
  EXPECT_EQ((*r3)["flight_recorder"]["format"], "pickle");
  EXPECT_NE((*r3)["collectives"][0].get<std::string>().find("issued #5"), std::string::npos);
  EXPECT_EQ((*rank_entry(s.report(), 0))["waits_for"], json::array({3}));
}

}  // namespace
}  // namespace hangscope

// Facts that cannot all be true (issue 30, item 9): two agents with one --node-name, negative
// ranks, ranks past the world size, ranks of one job claiming different world sizes, one rank
// claimed by two live processes, one pid twice in a sample. Each is named in the analysis's
// diagnostics (report.md, report.json, the terminal) and the verdict comes from what is
// consistent, never "dead" ranks that are alive.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis_builders.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/report/report.h"

namespace hangscope::analysis {
namespace {

using namespace testing_builders;

// 4 ranks, 2 per node; rank 3 waits at its store key while the others wait for it in a barrier.
JobBuilder store_job() {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) job.rank(r, r == 3 ? store_wait_stack(r) : barrier_stack());
  return job;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& line : lines) {
    if (line.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

// Two agents started with the same --node-name on two machines whose ranks have the same pids
// (containers): the answers as diagnose receives them, each agent's samples under the name "gpu".
std::vector<model::NodeAnswer> two_agents_named_alike() {
  auto bundle = store_job().bundle();
  std::vector<model::NodeAnswer> answers;
  for (const auto& status : bundle.nodes) {
    model::NodeAnswer a;
    a.status = status;
    a.status.name = "gpu";
    a.status.address = status.name == "node0" ? "10.0.0.1:7447" : "10.0.0.2:7447";
    a.source = *a.status.address;
    for (auto s : bundle.snapshots) {
      if (s.node_name != status.name) continue;
      s.node_name = "gpu";
      for (auto& p : s.processes) p.pid = 1000 + p.identity.rank.value_or(0) % 2;  // pids collide
      a.samples.push_back(std::move(s));
    }
    answers.push_back(std::move(a));
  }
  return answers;
}

TEST(InputConsistency, TwoAgentsWithOneNodeNameAreNamedApartByTheirAddresses) {
  std::vector<std::string> renamed;
  const auto bundle = model::assemble_bundle(two_agents_named_alike(), &renamed);
  ASSERT_EQ(bundle.nodes.size(), 2u);
  EXPECT_EQ(bundle.nodes[0].name, "gpu@10.0.0.1:7447");
  EXPECT_EQ(bundle.nodes[1].name, "gpu@10.0.0.2:7447");
  ASSERT_EQ(renamed.size(), 2u);
  EXPECT_NE(renamed[1].find("node name 'gpu' is given by 2 agents or files"), std::string::npos)
      << renamed[1];
  for (const auto& s : bundle.snapshots) {
    EXPECT_EQ(s.node_name.rfind("gpu@10.0.0.", 0), 0u);
    EXPECT_TRUE(any_contains(s.notes, "is named " + s.node_name)) << joined(s.notes);
  }
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_TRUE(a.diagnostics.empty()) << joined(a.diagnostics);
  ASSERT_EQ(a.jobs.size(), 1u);
  ASSERT_EQ(a.jobs[0].ranks.size(), 4u);
  for (const auto& r : a.jobs[0].ranks) EXPECT_NE(r.state, RankState::kDead) << *r.rank;
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].id, "rank-diverged");
  EXPECT_EQ(a.verdicts[0].diverged_ranks.text(), "3");
  // The report names it in the nodes' notes.
  const auto md = report::report_markdown(bundle, a);
  EXPECT_NE(md.find("| gpu@10.0.0.2:7447 | 10.0.0.2:7447 | ok |"), std::string::npos) << md;
  EXPECT_NE(md.find("is named gpu@10.0.0.2:7447"), std::string::npos) << md;
}

TEST(InputConsistency, TheSameAgentTwiceGetsANumber) {
  auto answers = two_agents_named_alike();
  answers[1].source = answers[0].source;
  const auto bundle = model::assemble_bundle(std::move(answers));
  EXPECT_EQ(bundle.nodes[0].name, "gpu@10.0.0.1:7447");
  EXPECT_EQ(bundle.nodes[1].name, "gpu@10.0.0.1:7447#2");
}

// The bundle an older diagnose made of the same answers (one node "gpu", two captures of each
// sample, colliding pids): the second capture of each sample is another node, named in the
// diagnostics, and no live rank is called dead.
TEST(InputConsistency, TwoCapturesOfOneSampleAreTwoNodes) {
  model::Bundle bundle;
  for (auto& a : two_agents_named_alike()) {
    bundle.nodes.push_back(a.status);
    for (auto& s : a.samples) bundle.snapshots.push_back(std::move(s));
  }
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_EQ(joined(a.diagnostics),
            "node gpu has 2 captures of sample 0 (two agents or files with one node name?): "
            "capture 2 of each sample is taken as node gpu#2\n");
  ASSERT_EQ(a.jobs.size(), 1u);
  ASSERT_EQ(a.jobs[0].ranks.size(), 4u);
  for (const auto& r : a.jobs[0].ranks) {
    EXPECT_NE(r.state, RankState::kDead);
    EXPECT_EQ(r.node, *r.rank < 2 ? "gpu" : "gpu#2");
  }
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].id, "rank-diverged");
  EXPECT_EQ(a.verdicts[0].diverged_ranks.text(), "3");
}

TEST(InputConsistency, BadRanksAreNamedAndTheRestIsDiagnosed) {
  // Ranks 0-3 of a world of 4, rank 3 diverged; then: node1's rank 2 says it is rank -1, a
  // process claims rank 7, another claims rank 0 again, and node0 lists pid 1001 twice.
  auto bundle = store_job().bundle();
  for (auto& s : bundle.snapshots) {
    if (s.node_name == "node1") {
      for (auto& p : s.processes) {
        if (p.pid == 1002) p.identity.rank = -1;
      }
      auto beyond = s.processes.front();
      beyond.pid = 1007;
      beyond.identity.rank = 7;
      s.processes.push_back(beyond);
      auto again = s.processes.front();
      again.pid = 1010;
      again.identity.rank = 0;
      s.processes.push_back(again);
    } else {
      auto twice = s.processes.back();  // pid 1001 (rank 1)
      twice.identity.rank = 2;
      s.processes.push_back(twice);
    }
  }
  const auto a = diagnosis::diagnose(bundle);
  const auto all = joined(a.diagnostics);
  EXPECT_TRUE(any_contains(a.diagnostics,
                           "node1 pid 1002 claims rank -1 of job 127.0.0.1:29500: "
                           "no rank is negative"))
      << all;
  EXPECT_TRUE(any_contains(a.diagnostics,
                           "node1 pid 1007 claims rank 7 of job 127.0.0.1:29500, whose world size "
                           "is 4: listed without a rank number"))
      << all;
  EXPECT_TRUE(any_contains(a.diagnostics,
                           "job 127.0.0.1:29500: rank 0 is claimed by node0 pid 1000 and node1 "
                           "pid 1010"))
      << all;
  EXPECT_TRUE(any_contains(a.diagnostics, "node0: pid 1001 is in sample 0 twice")) << all;
  EXPECT_EQ(a.diagnostics.size(), 4u) << all;
  ASSERT_EQ(a.jobs.size(), 1u);
  const auto& job = a.jobs[0];
  // Rank 0 is node0's pid 1000; rank 1 is pid 1001's first record; rank 2 has no process now.
  ASSERT_NE(job.find(0), nullptr);
  EXPECT_EQ(job.find(0)->pid, 1000);
  ASSERT_NE(job.find(1), nullptr);
  EXPECT_EQ(job.find(1)->history.size(), 3u);  // one record per sample
  EXPECT_EQ(job.find(2), nullptr);
  EXPECT_EQ(job.find(7), nullptr);
  EXPECT_EQ(job.missing.text(), "2");
  std::size_t without_number = 0;
  for (const auto& r : job.ranks) without_number += r.rank ? 0 : 1;
  EXPECT_EQ(without_number, 3u);  // pids 1002, 1007, 1010
  // Rank 3 is still the one the others wait for.
  bool named = false;
  for (const auto& v : a.verdicts) {
    if (v.diverged_ranks.contains(3)) named = true;
  }
  EXPECT_TRUE(named) << a.conclusion;
  // Every rendering names them.
  const auto md = report::report_markdown(bundle, a);
  EXPECT_NE(md.find("## Diagnostics: input that does not add up\n\n- "), std::string::npos) << md;
  EXPECT_NE(md.find("\n- node1 pid 1002 claims rank -1 of job 127.0.0.1:29500"), std::string::npos)
      << md;
  std::ostringstream out;
  report::write_report_json(out, bundle, a);
  const auto json = nlohmann::json::parse(out.str());
  EXPECT_EQ(json["diagnostics"].size(), 4u);
  const auto terminal = report::terminal_summary(a, false);
  EXPECT_NE(terminal.find("  note: node1 pid 1007 claims rank 7"), std::string::npos) << terminal;
}

TEST(InputConsistency, MostRanksDecideTheWorldSize) {
  auto bundle = store_job().bundle();
  for (auto& s : bundle.snapshots) {
    for (auto& p : s.processes) {
      if (p.pid == 1001) p.identity.world_size = 16;
    }
  }
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.jobs.size(), 1u);
  EXPECT_EQ(a.jobs[0].world_size, 4);
  EXPECT_TRUE(a.jobs[0].missing.empty());
  EXPECT_TRUE(any_contains(a.diagnostics,
                           "job 127.0.0.1:29500: its ranks claim different world sizes, 4 (3 "
                           "processes) and 16 (node0 pid 1001); taken as 4"))
      << joined(a.diagnostics);
  for (const auto& v : a.verdicts) EXPECT_NE(v.id, "rank-dead") << v.summary;
}

// A rank that restarted (its earlier process gone, a new one in its place) is the live one.
TEST(InputConsistency, ARestartedRankIsItsLiveProcess) {
  auto bundle = store_job().bundle();
  for (auto& s : bundle.snapshots) {
    if (s.node_name != "node0") continue;
    for (auto& p : s.processes) {
      if (p.pid == 1000 && s.sample_index == 2) p.pid = 1100;  // rank 0 restarted
    }
  }
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_TRUE(a.diagnostics.empty()) << joined(a.diagnostics);
  ASSERT_NE(a.jobs[0].find(0), nullptr);
  EXPECT_EQ(a.jobs[0].find(0)->pid, 1100);
  EXPECT_NE(a.jobs[0].find(0)->state, RankState::kDead);
}

}  // namespace
}  // namespace hangscope::analysis

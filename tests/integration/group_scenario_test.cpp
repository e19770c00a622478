// Jobs whose process groups live outside torch.distributed's registry, on the virtual cluster
// (tools/repro/group_job.py on the simulated vLLM and TRL of tools/repro/sim): vLLM's
// data-parallel engine cores on their stateless DP group, vLLM's StatelessProcessGroup, an RL
// weight sync joining a trainer job and a rollout job, a torch subgroup only user code holds.
// Each is hung at a culprit picked at random (std::random_device, or HANGSCOPE_SCENARIO_SEED to
// replay; the seed is printed with every failure), or runs healthy. Checked as a user reads
// `diagnose --json`: the top verdict's `processes` name the culprit's process (node, pid) as
// diverged and the processes that announced they wait on the scenario's group as waiting, with
// one group key and their ranks in that group; the RL verdicts span both jobs (`jobs`); the
// summary names the culprit's node and pid; the DP coordinator is never the diverged process;
// a healthy job gets no verdict and exit code 0.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "virtual_cluster.h"

namespace hangscope {
namespace {

using nlohmann::json;

struct GroupScenario {
  std::string name{};
  std::string scenario{};   // group_job.py --scenario
  int culprits = 0;         // the culprit is drawn from 0..culprits-1 (0: no --culprit)
  bool peer = false;        // spg-barrier: a source (--peer) other than the culprit, also drawn
  std::string group{};      // the announced label of the group the verdict is about
  std::string verdict{};    // the top verdict's id ("" = any)
  bool spans_jobs = false;  // the verdict's `jobs` hold two jobs (RL weight sync)
  bool healthy = false;
};

void PrintTo(const GroupScenario& s, std::ostream* out) {
  *out << s.name;
}

unsigned scenario_seed() {
  if (const char* text = std::getenv("HANGSCOPE_SCENARIO_SEED"); text && *text) {
    return static_cast<unsigned>(std::strtoul(text, nullptr, 10));
  }
  return std::random_device{}();
}

// One process's announcement in its node's log (group_job.py's docstring lists the forms).
struct Announced {
  std::string kind{};   // "engine dp", "rank", "spg rank", "trainer rank", "rollout rank",
                        // "coordinator"
  int index = -1;       // the DP rank, rank or group rank in the line
  std::string node{};   // node<n>
  int pid = 0;          // inside the node's PID namespace
  std::string state{};  // waiting, diverged, stuck, idle, busy ("" for the coordinator)
  std::string group{};  // the group label ("" = none)
  int group_rank = -1;
};

std::vector<Announced> announcements(const std::string& dir, int nodes) {
  static const std::regex line(
      "^(engine dp|rank|spg rank|trainer rank|rollout rank) ([0-9]+) pid ([0-9]+) "
      "(waiting|diverged|stuck|idle|busy)(?: group (\\S+) grank ([0-9]+))?");
  static const std::regex coordinator("^coordinator pid ([0-9]+)");
  std::vector<Announced> all;
  for (int n = 0; n < nodes; ++n) {
    std::ifstream in(dir + "/node" + std::to_string(n) + ".log");
    std::string text;
    std::smatch m;
    while (std::getline(in, text)) {
      Announced a;
      a.node = "node" + std::to_string(n);
      if (std::regex_search(text, m, line)) {
        a.kind = m[1];
        a.index = std::stoi(m[2]);
        a.pid = std::stoi(m[3]);
        a.state = m[4];
        if (m[5].matched) {
          a.group = m[5];
          a.group_rank = std::stoi(m[6]);
        }
      } else if (std::regex_search(text, m, coordinator)) {
        a.kind = "coordinator";
        a.pid = std::stoi(m[1]);
      } else {
        continue;
      }
      all.push_back(a);
    }
  }
  return all;
}

std::string describe(const Announced& a) {
  return a.kind + (a.index >= 0 ? " " + std::to_string(a.index) : std::string()) + " (" + a.node +
         " pid " + std::to_string(a.pid) + ")";
}

// The verdict's entry for a process, null if it lists none.
const json* entry_of(const json& verdict, const Announced& a) {
  if (!verdict.contains("processes") || !verdict["processes"].is_array()) return nullptr;
  for (const auto& p : verdict["processes"]) {
    if (p.value("node", "") == a.node && p.value("pid", 0) == a.pid) return &p;
  }
  return nullptr;
}

// The role and global rank a process must show: engine cores "engine", torch ranks (vLLM
// workers, trainer and rollout ranks, a job's ranks) "rank" with their rank; the members of a
// plain StatelessProcessGroup have no torch world (not checked).
void expect_identity(const json& entry, const Announced& a) {
  if (a.kind == "engine dp") {
    EXPECT_EQ(entry.value("role", ""), "engine") << describe(a) << ": " << entry.dump();
  } else if (a.kind == "rank" || a.kind == "trainer rank" || a.kind == "rollout rank") {
    EXPECT_EQ(entry.value("role", ""), "rank") << describe(a) << ": " << entry.dump();
    EXPECT_EQ(entry.value("rank", -1), a.index) << describe(a) << ": " << entry.dump();
  }
}

bool names_process(const std::string& text, const Announced& a) {
  const std::regex node("\\b" + a.node + "\\b");
  const std::regex pid("\\bpid " + std::to_string(a.pid) + "\\b");
  return std::regex_search(text, node) && std::regex_search(text, pid);
}

class GroupScenarios : public ::testing::TestWithParam<GroupScenario> {};

TEST_P(GroupScenarios, DiagnoseNamesTheProcessThatDiverged) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  const auto& s = GetParam();
  const unsigned seed = scenario_seed();
  std::mt19937 random(seed);
  std::string job = "group_job.py --scenario " + s.scenario;
  int culprit = -1;
  if (s.culprits > 0) {
    culprit = static_cast<int>(random() % static_cast<unsigned>(s.culprits));
    job += " --culprit " + std::to_string(culprit);
  }
  if (s.peer) {
    const int peer = (culprit + 1 + static_cast<int>(random() % 3u)) % 4;
    job += " --peer " + std::to_string(peer);
  }
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (replay: HANGSCOPE_SCENARIO_SEED=" + std::to_string(seed) + "), job " + job);
  const auto started = std::chrono::steady_clock::now();
  testing::VirtualCluster cluster({.nodes = 2, .ranks_per_node = 2, .job = job});
  ASSERT_TRUE(cluster.up());
  const auto d = cluster.diagnose("bundle");
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started);
  const auto processes = announcements(cluster.dir(), 2);
  ASSERT_FALSE(d.report.is_null()) << d.err;
  const auto& verdicts = d.report["verdicts"];
  // What hangscope said first, for the record.
  std::cout << "[group-scenario] " << s.name << " seed " << seed << " job '" << job << "' exit "
            << d.exit_code << " up+diagnose " << seconds.count() << " s top "
            << (verdicts.empty()
                    ? std::string("(none)")
                    : verdicts[0].value("id", "") + ": " + verdicts[0].value("summary", "") +
                          " processes " + verdicts[0].value("processes", json()).dump())
            << std::endl;

  // The DP coordinator waits for nobody's collective: never the diverged process.
  for (const auto& a : processes) {
    if (a.kind != "coordinator") continue;
    for (const auto& v : verdicts) {
      if (const auto* e = entry_of(v, a)) {
        EXPECT_NE(e->value("side", ""), "diverged") << "the DP coordinator: " << v.dump(1);
      }
    }
  }
  if (s.healthy) {
    EXPECT_TRUE(verdicts.empty()) << verdicts.dump(1);
    EXPECT_EQ(d.exit_code, 0);
    return;
  }
  EXPECT_EQ(d.exit_code, 3);
  ASSERT_FALSE(verdicts.empty()) << d.report.value("conclusion", json()).dump();
  const auto& top = verdicts[0];
  if (!s.verdict.empty()) {
    // A rule's variants share its id as a prefix (dp-dummy-batch-desync-workers: the same bug
    // seen from the worker processes).
    EXPECT_EQ(top.value("id", "").rfind(s.verdict, 0), 0u) << top.dump(1);
  }
  ASSERT_TRUE(top.contains("processes") && top["processes"].is_array()) << top.dump(1);

  // The culprit: a process that announced it diverged (or, a vLLM worker, that it is stuck);
  // a DP engine and its stuck worker may both be named diverged, never waiting.
  std::vector<const Announced*> diverged;
  for (const auto& a : processes) {
    if (a.state == "diverged" || a.state == "stuck") diverged.push_back(&a);
  }
  ASSERT_FALSE(diverged.empty()) << "no process announced it diverged";
  bool named = false;
  bool in_summary = false;
  for (const auto* a : diverged) {
    const auto* e = entry_of(top, *a);
    if (!e) continue;
    EXPECT_NE(e->value("side", ""), "waiting") << describe(*a) << ": " << e->dump();
    if (e->value("side", "") != "diverged") continue;
    named = true;
    expect_identity(*e, *a);
    in_summary = in_summary || names_process(top.value("summary", ""), *a);
  }
  EXPECT_TRUE(named) << "no announced culprit is a diverged process: " << top.dump(1);
  EXPECT_TRUE(in_summary) << "the summary names no culprit's node and pid: "
                          << top.value("summary", "");

  // The members of the scenario's group: the waiting ones as waiting, every one (the culprit
  // too, when it is a member) with the same group key and its rank in that group.
  std::optional<json> group_key;
  for (const auto& a : processes) {
    if (a.group != s.group) continue;
    const auto* e = entry_of(top, a);
    const bool waits = a.state == "waiting";
    if (!e) {
      ADD_FAILURE() << describe(a) << " (" << a.state << " in " << a.group
                    << ") is not among the verdict's processes: " << top["processes"].dump(1);
      continue;
    }
    if (waits) {
      EXPECT_EQ(e->value("side", ""), "waiting") << describe(a) << ": " << e->dump();
      expect_identity(*e, a);
    }
    EXPECT_EQ(e->value("group_rank", -1), a.group_rank) << describe(a) << ": " << e->dump();
    const json key = e->value("group", json());
    EXPECT_TRUE(key.is_string() && !key.get<std::string>().empty())
        << describe(a) << ": " << e->dump();
    if (!group_key) group_key = key;
    EXPECT_EQ(key, *group_key) << describe(a) << ": one group, one key";
  }
  if (s.spans_jobs) {
    ASSERT_TRUE(top.contains("jobs") && top["jobs"].is_array()) << top.dump(1);
    EXPECT_GE(top["jobs"].size(), 2u) << top.dump(1);
  }
}

INSTANTIATE_TEST_SUITE_P(
    VirtualCluster, GroupScenarios,
    ::testing::Values(
        // vLLM DP: 4 engine cores (2 per node) on their stateless DP group, a worker each, the
        // DP coordinator on node 0.
        GroupScenario{.name = "dp_engine_hung_in_step",
                      .scenario = "dp-step-hang",
                      .culprits = 4,
                      .group = "dp"},
        GroupScenario{.name = "dp_engines_idle", .scenario = "dp-idle", .healthy = true},
        GroupScenario{.name = "dp_engines_busy", .scenario = "dp-busy", .healthy = true},
        // The engines' workers in vLLM's DP and EP groups; one engine skipped its dummy batch.
        GroupScenario{.name = "dp_ep_dummy_batch_skipped",
                      .scenario = "dp-ep-dummy-desync",
                      .culprits = 4,
                      .group = "worker-dp",
                      .verdict = "dp-dummy-batch-desync"},
        // vLLM's StatelessProcessGroup, 4 plain processes (2 per node).
        GroupScenario{.name = "spg_broadcast_source_stuck",
                      .scenario = "spg-broadcast",
                      .culprits = 4,
                      .group = "spg"},
        GroupScenario{
            .name = "spg_sender_stuck", .scenario = "spg-send-recv", .culprits = 4, .group = "spg"},
        GroupScenario{.name = "spg_receiver_stuck_before_barrier",
                      .scenario = "spg-barrier",
                      .culprits = 4,
                      .peer = true,
                      .group = "spg"},
        // TRL's weight sync: trainer job (node 1) and rollout job (node 0) in one group.
        GroupScenario{.name = "rl_trainer_stuck_before_broadcast",
                      .scenario = "rl-trainer-stuck",
                      .group = "weight-sync",
                      .spans_jobs = true},
        GroupScenario{.name = "rl_rollout_worker_never_updates",
                      .scenario = "rl-rollout-stuck",
                      .culprits = 2,
                      .group = "weight-sync",
                      .spans_jobs = true},
        // A torch subgroup made after init, held only by user code.
        GroupScenario{.name = "user_subgroup_member_stuck",
                      .scenario = "user-subgroup",
                      .culprits = 4,
                      .group = "subgroup"}),
    [](const ::testing::TestParamInfo<GroupScenario>& param_info) {
      return param_info.param.name;
    });

}  // namespace
}  // namespace hangscope

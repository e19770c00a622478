// Real inference-style jobs on the virtual cluster, launched the way users launch them
// (torchrun, torch.multiprocessing.spawn, vLLM's multiproc workers, Ray actors) with vLLM's
// TP x PP x DP groups (tools/repro/parallel_job.py on the simulated vLLM of tools/repro/sim),
// hung at one culprit rank picked at random from the ranks where the scenario makes sense:
// diagnose must name that rank first (an init hang: the rank that never arrived), or, for a
// slow but healthy job, nothing. The seed (std::random_device, or HANGSCOPE_SCENARIO_SEED)
// and the culprit are printed with every failure: rerun with the same seed to replay it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "virtual_cluster.h"

namespace hangscope {
namespace {

using nlohmann::json;

struct Layout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int world() const { return tp * pp * dp; }
  // vLLM's place of a rank: rank = dp * PP * TP + pp * TP + tp.
  int tp_of(int rank) const { return rank % tp; }
  int pp_of(int rank) const { return rank / tp % pp; }
  int dp_of(int rank) const { return rank / (tp * pp); }
  std::string text() const {
    return "tp=" + std::to_string(tp) + ",pp=" + std::to_string(pp) + ",dp=" + std::to_string(dp);
  }
};

// Which ranks may be the culprit.
enum class Culprits { kAny, kNotLastStage, kFirstStage };

// How the culprit and one of its peers wait: a function name that is the rank's wait point's
// function or its caller's ("" = not checked), and the wait point's kind ("" = not checked).
struct Wait {
  std::string function{};
  std::string kind{};
};

struct ParallelScenario {
  std::string name{};
  std::string launcher{};
  Layout layout{};
  int nodes = 2;
  int ranks_per_node = 2;
  std::string scenario{};
  Culprits culprits = Culprits::kAny;
  std::string verdict{};  // the top verdict's id ("" = any); healthy: no verdict expected
  Wait culprit_wait{};
  Wait tp_peer_wait{};  // the culprit's TP peer (tp_rank ^ 1, same DP and PP rank)
  bool healthy = false;
  bool in_init = false;  // init hangs: no process group exists yet
  bool absent = false;   // the culprit's process was never started
};

void PrintTo(const ParallelScenario& s, std::ostream* out) {
  *out << s.name;
}

std::vector<int> candidates(const ParallelScenario& s) {
  std::vector<int> ranks;
  for (int r = 0; r < s.layout.world(); ++r) {
    const int pp = s.layout.pp_of(r);
    if (s.culprits == Culprits::kNotLastStage && pp == s.layout.pp - 1) continue;
    if (s.culprits == Culprits::kFirstStage && pp != 0) continue;
    ranks.push_back(r);
  }
  return ranks;
}

unsigned scenario_seed() {
  if (const char* text = std::getenv("HANGSCOPE_SCENARIO_SEED"); text && *text) {
    return static_cast<unsigned>(std::strtoul(text, nullptr, 10));
  }
  return std::random_device{}();
}

const json* rank_entry(const json& report, int rank) {
  for (const auto& r : report["ranks"]) {
    if (r["rank"] == rank) return &r;
  }
  return nullptr;
}

bool waits_in(const json& entry, const std::string& function) {
  const auto& wp = entry["wait_point"];
  if (!wp.is_object()) return false;
  if (wp.value("function", "") == function) return true;
  return wp.contains("caller") && wp["caller"].is_object() &&
         wp["caller"].value("function", "") == function;
}

// The pid a rank announced ("rank R pid P ...") in its node's log (inside the node's PID
// namespace, where its agent sees it), 0 if none.
int announced_pid(const std::string& dir, int nodes, int rank) {
  const std::regex line("^rank " + std::to_string(rank) + " pid ([0-9]+) ");
  for (int n = 0; n < nodes; ++n) {
    std::ifstream in(dir + "/node" + std::to_string(n) + ".log");
    std::string text;
    std::smatch match;
    while (std::getline(in, text)) {
      if (std::regex_search(text, match, line)) return std::stoi(match[1]);
    }
  }
  return 0;
}

std::string verdict_text(const json& verdict) {
  std::string text = verdict.value("summary", "");
  if (verdict.contains("evidence")) {
    for (const auto& e : verdict["evidence"]) text += "\n" + e.get<std::string>();
  }
  return text;
}

class ParallelScenarios : public ::testing::TestWithParam<ParallelScenario> {};

TEST_P(ParallelScenarios, DiagnoseNamesTheCulprit) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  const auto& s = GetParam();
  const unsigned seed = scenario_seed();
  const auto ranks = candidates(s);
  const int culprit = ranks[std::mt19937(seed)() % ranks.size()];
  const std::string job = "--launcher " + s.launcher + " --layout " + s.layout.text() +
                          " --scenario " + s.scenario + " --culprit " + std::to_string(culprit);
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (replay: HANGSCOPE_SCENARIO_SEED=" + std::to_string(seed) + "), culprit rank " +
               std::to_string(culprit) + ", job " + job);
  testing::VirtualCluster cluster(
      {.nodes = s.nodes, .ranks_per_node = s.ranks_per_node, .job = job});
  ASSERT_TRUE(cluster.up());
  // A slow job's steps last up to 1.5 s: it is sampled as diagnose samples by default (3
  // samples 1 s apart), so that each rank is seen at two different steps.
  const auto d =
      cluster.diagnose("bundle", s.scenario == "slow-healthy" ? "--samples 3 --interval 1s" : "");
  ASSERT_FALSE(d.report.is_null());
  const auto& verdicts = d.report["verdicts"];
  // One line per run for the record: what hangscope said first.
  std::cout << "[scenario] " << s.name << " seed " << seed << " culprit " << culprit << " exit "
            << d.exit_code << " top "
            << (verdicts.empty()
                    ? std::string("(none)")
                    : verdicts[0].value("id", "") + " " + verdicts[0]["diverged_ranks"].dump() +
                          " " + verdicts[0].value("summary", ""))
            << std::endl;

  if (s.healthy) {
    EXPECT_TRUE(verdicts.empty()) << verdicts.dump(1);
    EXPECT_EQ(d.exit_code, 0);
    return;
  }
  EXPECT_EQ(d.exit_code, 3);
  ASSERT_FALSE(verdicts.empty()) << d.report["conclusion"];
  const auto& top = verdicts[0];
  if (!s.verdict.empty()) {
    EXPECT_EQ(top["id"], s.verdict) << top.dump(1);
  }
  EXPECT_EQ(top["diverged_ranks"], json::array({culprit})) << top.dump(1);
  EXPECT_FALSE(top["waiting_ranks"].empty()) << top.dump(1);

  const auto* entry = rank_entry(d.report, culprit);
  if (s.absent) {
    // No process anywhere: the report says so rather than pointing at a process.
    const auto text = verdict_text(top);
    EXPECT_NE(text.find("no process on any answering node"), std::string::npos) << text;
    if (entry) {
      EXPECT_EQ((*entry).value("state", ""), "missing") << entry->dump(1);
    }
    return;
  }
  ASSERT_NE(entry, nullptr) << "rank " << culprit << " not in the report";
  // The culprit's own process and node.
  const int pid = announced_pid(cluster.dir(), s.nodes, culprit);
  EXPECT_EQ((*entry)["pid"], pid) << entry->dump(1);
  EXPECT_EQ((*entry)["node"], "node" + std::to_string(culprit / s.ranks_per_node))
      << entry->dump(1);
  if (!s.culprit_wait.function.empty()) {
    EXPECT_TRUE(waits_in(*entry, s.culprit_wait.function))
        << "culprit should wait in " << s.culprit_wait.function << ": " << entry->dump(1);
  }
  if (!s.culprit_wait.kind.empty()) {
    EXPECT_EQ((*entry)["wait_point"]["kind"], s.culprit_wait.kind) << entry->dump(1);
  }
  if (!s.tp_peer_wait.function.empty() && s.layout.tp > 1) {
    const int peer = culprit - s.layout.tp_of(culprit) + (s.layout.tp_of(culprit) ^ 1);
    const auto* peer_entry = rank_entry(d.report, peer);
    ASSERT_NE(peer_entry, nullptr) << "rank " << peer << " not in the report";
    EXPECT_TRUE(waits_in(*peer_entry, s.tp_peer_wait.function))
        << "TP peer " << peer << " should wait in " << s.tp_peer_wait.function << ": "
        << peer_entry->dump(1);
  }
  if (s.in_init) return;
  // After init every rank's place comes from its process groups in memory, and matches the
  // layout vLLM built.
  for (int r = 0; r < s.layout.world(); ++r) {
    const auto* e = rank_entry(d.report, r);
    ASSERT_NE(e, nullptr) << "rank " << r << " not in the report";
    const json expected = {{"identity_source", "memory:process-group"},
                           {"tp", s.layout.tp_of(r)},
                           {"pp", s.layout.pp_of(r)},
                           {"dp", s.layout.dp_of(r)}};
    json actual;
    for (const auto& [key, value] : expected.items()) actual[key] = (*e).value(key, json());
    EXPECT_EQ(actual, expected) << "rank " << r << ": " << e->dump(1);
  }
}

const Layout kTpDp{.tp = 2, .pp = 1, .dp = 2};
const Layout kTpPp{.tp = 2, .pp = 2, .dp = 1};
const Layout kTpPpDp{.tp = 2, .pp = 2, .dp = 2};

// Wait points: torch's collective (or the GroupCoordinator method calling it) and the job's
// functions with telling names (tools/repro/parallel_job.py).
const Wait kBarrier{.function = "barrier"};
const Wait kAllReduce{.function = "all_reduce"};

INSTANTIATE_TEST_SUITE_P(
    VirtualCluster, ParallelScenarios,
    ::testing::Values(
        // The four launchers, 2 nodes x 2 ranks: the culprit skips its TP all_reduce and waits
        // in the step's world barrier; its TP peer waits in the all_reduce.
        ParallelScenario{.name = "torchrun_tp_skip",
                         .launcher = "torchrun",
                         .layout = kTpDp,
                         .scenario = "tp-skip",
                         .culprit_wait = kBarrier,
                         .tp_peer_wait = kAllReduce},
        ParallelScenario{.name = "spawn_tp_skip",
                         .launcher = "spawn",
                         .layout = kTpDp,
                         .scenario = "tp-skip",
                         .culprit_wait = kBarrier,
                         .tp_peer_wait = kAllReduce},
        ParallelScenario{.name = "vllm_worker_dp_stall",
                         .launcher = "vllm-worker",
                         .layout = kTpDp,
                         .scenario = "dp-stall",
                         .culprit_wait = {.function = "prepare_batch", .kind = "sleep"},
                         .tp_peer_wait = kAllReduce},
        ParallelScenario{.name = "ray_actor_tp_skip",
                         .launcher = "ray-actor",
                         .layout = kTpPp,
                         .scenario = "tp-skip",
                         .culprit_wait = kBarrier,
                         .tp_peer_wait = kAllReduce},
        // TP x PP x DP, 2 nodes x 4 ranks, hung in a TP subgroup, a PP send/recv chain and a
        // DP group.
        ParallelScenario{.name = "tp_pp_dp_tp_skip",
                         .launcher = "torchrun",
                         .layout = kTpPpDp,
                         .ranks_per_node = 4,
                         .scenario = "tp-skip",
                         .culprit_wait = kBarrier,
                         .tp_peer_wait = kAllReduce},
        ParallelScenario{.name = "tp_pp_dp_pp_chain",
                         .launcher = "vllm-worker",
                         .layout = kTpPpDp,
                         .ranks_per_node = 4,
                         .scenario = "pp-chain",
                         .culprits = Culprits::kNotLastStage,
                         .culprit_wait = {.function = "wait_for_kv_cache_save", .kind = "lock"},
                         .tp_peer_wait = kAllReduce},
        ParallelScenario{.name = "tp_pp_dp_dp_stall",
                         .launcher = "spawn",
                         .layout = kTpPpDp,
                         .ranks_per_node = 4,
                         .scenario = "dp-stall",
                         .culprit_wait = {.function = "prepare_batch", .kind = "sleep"}},
        // Hangs at init: the culprit still loads its checkpoint (alive, never arrived), or
        // its process was never started.
        ParallelScenario{.name = "torchrun_init_hang",
                         .launcher = "torchrun",
                         .layout = kTpDp,
                         .scenario = "init-hang",
                         .culprit_wait = {.function = "read_checkpoint_shard", .kind = "sleep"},
                         .in_init = true},
        ParallelScenario{.name = "spawn_init_hang",
                         .launcher = "spawn",
                         .layout = kTpDp,
                         .scenario = "init-hang",
                         .culprit_wait = {.function = "read_checkpoint_shard", .kind = "sleep"},
                         .in_init = true},
        ParallelScenario{.name = "ray_actor_init_missing",
                         .launcher = "ray-actor",
                         .layout = kTpDp,
                         .scenario = "init-missing",
                         .in_init = true,
                         .absent = true},
        // Slow but healthy: a step every 0.5-1.5 s on every rank; no alarm.
        ParallelScenario{.name = "tp_pp_dp_slow_healthy",
                         .launcher = "torchrun",
                         .layout = kTpPpDp,
                         .ranks_per_node = 4,
                         .scenario = "slow-healthy",
                         .healthy = true},
        // One all_reduce loop iteration short: the culprit waits in its TP group's barrier,
        // the others in the loop's last all_reduce on the world group.
        ParallelScenario{.name = "torchrun_loop_early_exit",
                         .launcher = "torchrun",
                         .layout = kTpDp,
                         .scenario = "loop-early-exit",
                         .culprit_wait = kBarrier,
                         .tp_peer_wait = kAllReduce},
        ParallelScenario{.name = "ray_actor_loop_early_exit",
                         .launcher = "ray-actor",
                         .layout = kTpPp,
                         .scenario = "loop-early-exit",
                         .culprit_wait = kBarrier,
                         .tp_peer_wait = kAllReduce},
        // The seed bugs on TP subgroups.
        ParallelScenario{.name = "seed_a_symmetric_memory_tp_subgroups",
                         .launcher = "torchrun",
                         .layout = kTpDp,
                         .nodes = 4,
                         .ranks_per_node = 1,
                         .scenario = "symmetric-memory",
                         .verdict = "symmetric-memory-rendezvous",
                         .in_init = true},
        ParallelScenario{.name = "seed_b_autotune_cache_tp_subgroups",
                         .launcher = "vllm-worker",
                         .layout = kTpDp,
                         .scenario = "autotune-cache",
                         .verdict = "autotune-cache-mismatch",
                         .culprit_wait = kBarrier,
                         .tp_peer_wait = kAllReduce},
        ParallelScenario{.name = "seed_c_compiled_dag_tp_subgroups",
                         .launcher = "ray-actor",
                         .layout = kTpPp,
                         .scenario = "compiled-dag",
                         .culprits = Culprits::kFirstStage,
                         .verdict = "compiled-dag-stall",
                         .tp_peer_wait = kAllReduce}),
    [](const ::testing::TestParamInfo<ParallelScenario>& param_info) {
      return param_info.param.name;
    });

}  // namespace
}  // namespace hangscope

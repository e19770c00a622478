// Signature rules: the file format and its errors, precedence, three-valued facts, and for each
// built-in rule a snapshot that must fire it, a near miss that must not, and a cross-fire matrix
// (every rule against every scenario: a rule fires on its own scenario only).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "analysis_builders.h"
#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/error.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/rules/engine.h"
#include "hangscope/rules/rule.h"
#include "target_process.h"

namespace hangscope::rules {
namespace {

using namespace analysis::testing_builders;
using model::Frame;

const std::string kSite = "/usr/lib/python3/dist-packages/";

Frame site(const std::string& function, const std::string& path, int line) {
  auto f = py(function, kSite + path, line);
  return f;
}

// A method of a module under site-packages: method() of analysis_builders.h at kSite + path.
Frame site_method(const std::string& qualname, const std::string& path, int line) {
  return method(qualname, kSite + path, line);
}

// Seed A: node0's ranks inside the rendezvous, node1's moved on to in_the_same_node_as.
std::vector<Frame> in_rendezvous() {
  return {analysis::testing_builders::native("__futex_abstimed_wait_common"),
          site("rendezvous", "torch/distributed/_symmetric_memory/__init__.py", 1210),
          site_method("CustomAllreduce._init_mnnvl_buffer",
                      "vllm/distributed/device_communicators/custom_all_reduce.py", 233),
          site_method("CustomAllreduce.__init__",
                      "vllm/distributed/device_communicators/custom_all_reduce.py", 150),
          site_method("CudaCommunicator.__init__",
                      "vllm/distributed/device_communicators/cuda_communicator.py", 60),
          site_method("GroupCoordinator.__init__", "vllm/distributed/parallel_state.py", 300)};
}
std::vector<Frame> same_node_barrier() {
  return {analysis::testing_builders::native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          site("barrier", "torch/distributed/distributed_c10d.py", 3152),
          site("in_the_same_node_as", "vllm/distributed/parallel_state.py", 1500),
          site_method("MessageQueue.create_from_process_group",
                      "vllm/distributed/device_communicators/shm_broadcast.py", 600),
          site_method("GroupCoordinator.__init__", "vllm/distributed/parallel_state.py", 320)};
}

// Seed B: cache-hit ranks in the warm-up barrier, the others tuning in an all-reduce.
std::vector<Frame> autotune_barrier() {
  return {analysis::testing_builders::native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          site("barrier", "torch/distributed/distributed_c10d.py", 3152),
          site_method("GroupCoordinator.barrier", "vllm/distributed/parallel_state.py", 900),
          site("flashinfer_autotune", "vllm/model_executor/warmup/kernel_warmup.py", 120),
          site("kernel_warmup", "vllm/model_executor/warmup/kernel_warmup.py", 40)};
}
std::vector<Frame> autotune_tuning() {
  return {analysis::testing_builders::native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          site("all_reduce", "torch/distributed/distributed_c10d.py", 1536),
          site_method("AutoTuner._profile_single_kernel", "flashinfer/autotuner/autotuner.py", 700),
          site_method("AutoTuner.choose_one", "flashinfer/autotuner/autotuner.py", 500),
          site_method("GPUModelRunner._dummy_run", "vllm/v1/worker/gpu_model_runner.py", 2400),
          site("flashinfer_autotune", "vllm/model_executor/warmup/kernel_warmup.py", 110),
          site("kernel_warmup", "vllm/model_executor/warmup/kernel_warmup.py", 40)};
}

// Seed C: Ray compiled-graph workers in do_exec_tasks.
std::vector<Frame> dag_stalled() {
  return {analysis::testing_builders::native("cudaStreamSynchronize"),
          site_method("RayWorkerWrapper.execute_model_ray", "vllm/v1/executor/ray_utils.py", 130),
          site("do_exec_tasks", "ray/dag/compiled_dag_node.py", 200)};
}
std::vector<Frame> dag_collective() {
  return {analysis::testing_builders::native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          site("all_reduce", "torch/distributed/distributed_c10d.py", 1536),
          site_method("RayWorkerWrapper.execute_model_ray", "vllm/v1/executor/ray_utils.py", 130),
          site("do_exec_tasks", "ray/dag/compiled_dag_node.py", 200)};
}
std::vector<Frame> dag_channel_read() {
  return {analysis::testing_builders::native(
              "ray::core::experimental::MutableObjectManager::ReadAcquire"),
          site_method("Channel.read", "ray/experimental/channel/shared_memory_channel.py", 500),
          site("do_exec_tasks", "ray/dag/compiled_dag_node.py", 190)};
}

// Broken GPU P2P: every rank spins in the custom all-reduce.
std::vector<Frame> p2p_spin() {
  return {site_method("CustomAllreduce.all_reduce",
                      "vllm/distributed/device_communicators/custom_all_reduce.py", 330),
          site_method("CustomAllreduce.custom_all_reduce",
                      "vllm/distributed/device_communicators/custom_all_reduce.py", 360),
          site_method("CudaCommunicator.all_reduce",
                      "vllm/distributed/device_communicators/cuda_communicator.py", 120),
          site_method("GroupCoordinator.all_reduce", "vllm/distributed/parallel_state.py", 400)};
}

// Full /dev/shm: the source rank skipped in_the_same_node_as's broadcast.
std::vector<Frame> shm_source_skipped() {
  return {analysis::testing_builders::native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          site("all_reduce", "torch/distributed/distributed_c10d.py", 1536),
          site("in_the_same_node_as", "vllm/distributed/parallel_state.py", 1510),
          site_method("CustomAllreduce.__init__",
                      "vllm/distributed/device_communicators/custom_all_reduce.py", 120)};
}
std::vector<Frame> shm_broadcast_wait() {
  return {analysis::testing_builders::native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          site("broadcast", "torch/distributed/distributed_c10d.py", 1400),
          site("broadcast_object_list", "torch/distributed/distributed_c10d.py", 2100),
          site("in_the_same_node_as", "vllm/distributed/parallel_state.py", 1495),
          site_method("CustomAllreduce.__init__",
                      "vllm/distributed/device_communicators/custom_all_reduce.py", 120)};
}

// Asymmetric warm-up: one rank compiles, the others wait in the first collective.
std::vector<Frame> warmup_compiling() {
  return {site_method("InductorAdaptor.compile", "vllm/compilation/compiler_interface.py", 200),
          site_method("VllmBackend.__call__", "vllm/compilation/backends.py", 500),
          site_method("GPUModelRunner._dummy_run", "vllm/v1/worker/gpu_model_runner.py", 2400),
          site_method("Worker.compile_or_warm_up_model", "vllm/v1/worker/gpu_worker.py", 300)};
}
std::vector<Frame> warmup_waiting() {
  return {analysis::testing_builders::native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          site("all_reduce", "torch/distributed/distributed_c10d.py", 1536),
          site_method("GPUModelRunner._dummy_run", "vllm/v1/worker/gpu_model_runner.py", 2410),
          site_method("Worker.compile_or_warm_up_model", "vllm/v1/worker/gpu_worker.py", 300)};
}

// DP desync: the engines run dummy batches into the DP all-reduce; one idles in its queue.
std::vector<Frame> dp_in_sync() {
  return {analysis::testing_builders::native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          site("all_reduce", "torch/distributed/distributed_c10d.py", 1536),
          site("_run_ar", "vllm/v1/worker/dp_utils.py", 40),
          site("coordinate_batch_across_dp", "vllm/v1/worker/dp_utils.py", 120),
          site_method("GPUModelRunner._dummy_run", "vllm/v1/worker/gpu_model_runner.py", 2400),
          site_method("Worker.execute_dummy_batch", "vllm/v1/worker/gpu_worker.py", 400),
          site_method("DPEngineCoreProc.run_busy_loop", "vllm/v1/engine/core.py", 900)};
}
std::vector<Frame> dp_idle() {
  return {analysis::testing_builders::native("__futex_abstimed_wait_common"),
          py("wait", "/usr/lib/python3.11/threading.py", 320),
          py("get", "/usr/lib/python3.11/queue.py", 171),
          site_method("EngineCoreProc._process_input_queue", "vllm/v1/engine/core.py", 700),
          site_method("DPEngineCoreProc.run_busy_loop", "vllm/v1/engine/core.py", 890)};
}

using Scenario = std::function<model::Bundle()>;

std::map<std::string, Scenario> scenarios() {
  return {
      {"symmetric-memory-rendezvous",
       [] {
         JobBuilder job(8);
         for (int r = 0; r < 8; ++r)
           job.rank(r, r < 4 ? in_rendezvous() : same_node_barrier(), 'S', 0, 4);
         return job.bundle();
       }},
      {"autotune-cache-mismatch",
       [] {
         JobBuilder job(4);
         for (int r = 0; r < 4; ++r) job.rank(r, r == 0 ? autotune_barrier() : autotune_tuning());
         return job.bundle();
       }},
      {"compiled-dag-stall",
       [] {
         // PP=2 x TP=2: rank 1 (pp 0, tp 1) stalled in compute; rank 0 waits in its TP
         // all-reduce; stage 1 (ranks 2, 3) waits in channel reads.
         JobBuilder job(4);
         job.rank(0, dag_collective());
         job.rank(1, dag_stalled(), 'R', 30);
         job.rank(2, dag_channel_read());
         job.rank(3, dag_channel_read());
         return job.bundle();
       }},
      {"gpu-p2p-spin",
       [] {
         JobBuilder job(4);
         for (int r = 0; r < 4; ++r) {
           job.rank(r, p2p_spin(), 'R', 40)
               .fact(r, "cache.gpu_p2p[0]",
                     "/root/.cache/vllm/gpu_p2p_access_cache_for_0,1,2,3.json: P2P believed "
                     "available for 16 of 16 pairs");
         }
         return job.bundle();
       }},
      {"shm-broadcast-skip",
       [] {
         JobBuilder job(4);
         for (int r = 0; r < 4; ++r)
           job.rank(r, r == 0 ? shm_source_skipped() : shm_broadcast_wait());
         job.fact(0, "shm.free_bytes", "0")
             .fact(0, "shm", "0.1 MiB, 0.1 MiB used (100%), 0.0 MiB free");
         return job.bundle();
       }},
      {"asymmetric-warmup",
       [] {
         JobBuilder job(4);
         for (int r = 0; r < 4; ++r) {
           job.rank(r, r == 1 ? warmup_compiling() : warmup_waiting(), r == 1 ? 'R' : 'S',
                    r == 1 ? 40 : 0)
               .fact(r, "cache.torch_compile.state", r == 1 ? "cold" : "warm");
         }
         return job.bundle();
       }},
      {"dp-dummy-batch-desync",
       [] {
         JobBuilder job(4);
         for (int r = 0; r < 4; ++r) job.rank(r, r == 2 ? dp_idle() : dp_in_sync());
         return job.bundle();
       }},
      {"store-wait",
       [] {
         JobBuilder job(4);
         for (int r = 0; r < 4; ++r) job.rank(r, r == 3 ? store_wait_stack(3) : barrier_stack());
         return job.bundle();
       }},
      {"busy",
       [] {
         JobBuilder job(4);
         for (int r = 0; r < 4; ++r) {
           job.rank(
               r, r == 2 ? std::vector<Frame>{py("compute_slow_path", kUser, 9)} : barrier_stack(),
               r == 2 ? 'R' : 'S', r == 2 ? 40 : 0);
         }
         return job.bundle();
       }},
  };
}

const Rule& builtin(const std::string& id) {
  static const auto set = load_rules("", "");
  for (const auto& r : set.rules) {
    if (r.id == id) return r;
  }
  throw Error("no built-in rule " + id);
}

analysis::Analysis analyse_with(const model::Bundle& bundle) {
  return diagnosis::diagnose(bundle, load_rules("", ""));
}

TEST(Rules, BuiltinRulesAllParse) {
  const auto set = load_rules("", "");
  EXPECT_TRUE(set.errors.empty()) << set.errors.front();
  EXPECT_GE(set.rules.size(), 3u);
}

TEST(Rules, CrossFireMatrix) {
  const auto set = load_rules("", "");
  for (const auto& [name, make] : scenarios()) {
    const auto bundle = make();  // the analysis points into it
    const auto a = diagnosis::diagnose(bundle);
    for (const auto& rule : set.rules) {
      const bool fired = evaluate(rule, a.jobs.at(0)).has_value();
      EXPECT_EQ(fired, rule.id == name) << "rule " << rule.id << " on scenario " << name;
    }
  }
}

TEST(Rules, SymmetricMemoryRendezvousFiresAndExplainsTheGenericVerdict) {
  const auto bundle = scenarios()["symmetric-memory-rendezvous"]();
  const auto a = analyse_with(bundle);
  ASSERT_GE(a.verdicts.size(), 2u);
  EXPECT_EQ(a.verdicts[0].id, "symmetric-memory-rendezvous");
  EXPECT_EQ(a.verdicts[0].kind, analysis::VerdictKind::kSignature);
  EXPECT_EQ(a.verdicts[0].diverged_ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NE(a.verdicts[0].summary.find("nodes node1"), std::string::npos) << a.verdicts[0].summary;
  EXPECT_EQ(a.verdicts[1].kind, analysis::VerdictKind::kGeneric);
  EXPECT_EQ(a.verdicts[1].explained_by, "symmetric-memory-rendezvous");
  EXPECT_EQ(a.conclusion, a.verdicts[0].summary);
  EXPECT_FALSE(a.verdicts[0].remedies.empty());
}

TEST(Rules, SymmetricMemoryNearMisses) {
  // Every rank still inside the rendezvous: nobody moved on.
  JobBuilder all_in(8);
  for (int r = 0; r < 8; ++r) all_in.rank(r, in_rendezvous(), 'S', 0, 4);
  EXPECT_FALSE(evaluate(builtin("symmetric-memory-rendezvous"),
                        diagnosis::diagnose(all_in.bundle()).jobs[0]));
  // One node only: the fact "two or more nodes" is known false.
  JobBuilder one_node(8);
  for (int r = 0; r < 8; ++r)
    one_node.rank(r, r < 4 ? in_rendezvous() : same_node_barrier(), 'S', 0, 8);
  EXPECT_FALSE(evaluate(builtin("symmetric-memory-rendezvous"),
                        diagnosis::diagnose(one_node.bundle()).jobs[0]));
}

TEST(Rules, UnknownFactsAreNotReadAsFalse) {
  // node1 did not answer: the ranks span one known node, but the fact is unknown, not false.
  JobBuilder job(12);
  for (int r = 0; r < 8; ++r) job.rank(r, r < 4 ? in_rendezvous() : same_node_barrier(), 'S', 0, 8);
  auto bundle = job.bundle();
  bundle.nodes.push_back({"node1", "10.0.0.2:7447", model::NodeState::kUnreachable, "timeout", 0});
  const auto v =
      evaluate(builtin("symmetric-memory-rendezvous"), diagnosis::diagnose(bundle).jobs[0]);
  ASSERT_TRUE(v);
  EXPECT_LT(v->confidence, builtin("symmetric-memory-rendezvous").confidence);
  bool said = false;
  for (const auto& e : v->evidence) said = said || e.find("fact unknown") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Rules, AutotuneCacheMismatchOnRankZeroAndOnAnotherRank) {
  const auto bundle = scenarios()["autotune-cache-mismatch"]();
  auto a = analyse_with(bundle);
  EXPECT_EQ(a.verdicts.at(0).id, "autotune-cache-mismatch");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{0});
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{1, 2, 3}));
  JobBuilder variant(8);
  for (int r = 0; r < 8; ++r) variant.rank(r, r == 5 ? autotune_barrier() : autotune_tuning());
  const auto variant_bundle = variant.bundle();
  a = analyse_with(variant_bundle);
  EXPECT_EQ(a.verdicts.at(0).id, "autotune-cache-mismatch");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{5});
  // The cache fingerprints of the verdict's ranks are part of its evidence.
  auto with_cache = scenarios()["autotune-cache-mismatch"]();
  for (auto& node : with_cache.snapshots) {
    for (auto& p : node.processes) {
      if (p.identity.rank == 0) {
        p.facts["cache.flashinfer_autotune[0]"] = "/c/autotune_configs.json: keys for tp_rank 0";
      }
    }
  }
  const auto cached =
      evaluate(builtin("autotune-cache-mismatch"), diagnosis::diagnose(with_cache).jobs[0]);
  ASSERT_TRUE(cached);
  const auto has = [&](const std::string& text) {
    return std::any_of(cached->evidence.begin(), cached->evidence.end(),
                       [&](const std::string& e) { return e == text; });
  };
  EXPECT_TRUE(
      has("rank 0 (node0) cache.flashinfer_autotune[0]: /c/autotune_configs.json: keys "
          "for tp_rank 0"));
  EXPECT_TRUE(has("rank 1 (node0): no cache.flashinfer_autotune"));
  // Near miss: every rank tuning (no cache anywhere) is no autotune verdict.
  JobBuilder all_tuning(4);
  for (int r = 0; r < 4; ++r) all_tuning.rank(r, autotune_tuning());
  EXPECT_FALSE(evaluate(builtin("autotune-cache-mismatch"),
                        diagnosis::diagnose(all_tuning.bundle()).jobs[0]));
}

TEST(Rules, CompiledDagStallNamesTheStalledWorker) {
  const auto bundle = scenarios()["compiled-dag-stall"]();
  const auto a = analyse_with(bundle);
  EXPECT_EQ(a.verdicts.at(0).id, "compiled-dag-stall");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{1});
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 2, 3}));
  // Near miss: every worker waiting (the stall is elsewhere, e.g. the driver).
  JobBuilder all_waiting(4);
  for (int r = 0; r < 4; ++r) all_waiting.rank(r, r < 2 ? dag_collective() : dag_channel_read());
  EXPECT_FALSE(
      evaluate(builtin("compiled-dag-stall"), diagnosis::diagnose(all_waiting.bundle()).jobs[0]));
}

TEST(Rules, CompiledDagStallNamesTheDriverWhenItWasCaptured) {
  auto bundle = scenarios()["compiled-dag-stall"]();
  // The EngineCore driver, no rank, on node0: waiting for the graph's output.
  model::ProcessRecord driver;
  driver.pid = 900;
  driver.comm = "python3";
  driver.state = 'S';
  driver.identity.role = model::ProcessRole::kEngine;
  driver.identity.title = "VLLM::EngineCore";
  model::ProcessDump dump;
  dump.pid = 900;
  dump.threads.push_back(
      thread(900, 'S',
             {analysis::testing_builders::native("__futex_abstimed_wait_common"),
              site_method("Channel.read", "ray/experimental/channel/shared_memory_channel.py", 500),
              site_method("CompiledDAG._execute_until", "ray/dag/compiled_dag_node.py", 2300),
              site_method("CompiledDAGRef.get", "ray/experimental/compiled_dag_ref.py", 110),
              site_method("RayDistributedExecutor.execute_model",
                          "vllm/v1/executor/ray_executor.py", 400)}));
  driver.dump = std::move(dump);
  for (auto& node : bundle.snapshots) {
    if (node.node_name == "node0") node.processes.push_back(driver);
  }
  const auto a = analyse_with(bundle);
  ASSERT_EQ(a.verdicts.at(0).id, "compiled-dag-stall");
  const auto& v = a.verdicts[0];
  // The member names its node and pid: "worker rank 1 (node0 pid N) stalled".
  EXPECT_NE(v.summary.find("worker rank 1 (node0 pid "), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find(") stalled"), std::string::npos) << v.summary;
  EXPECT_TRUE(std::any_of(v.evidence.begin(), v.evidence.end(), [](const std::string& e) {
    return e.rfind(
               "the driver VLLM::EngineCore pid 900 (node0) waits for the graph's output in "
               "Channel.read (ray/experimental/channel/shared_memory_channel.py:500)",
               0) == 0;
  })) << ::testing::PrintToString(v.evidence);
  // Without the driver the line is left out, and the rule still fires.
  const auto plain = scenarios()["compiled-dag-stall"]();
  const auto b = analyse_with(plain);
  EXPECT_FALSE(std::any_of(b.verdicts[0].evidence.begin(), b.verdicts[0].evidence.end(),
                           [](const std::string& e) { return e.find("driver") == 0; }));
}

TEST(Rules, GpuP2pSpinFiresWhenEveryRankSpins) {
  const auto bundle = scenarios()["gpu-p2p-spin"]();
  const auto a = analyse_with(bundle);
  ASSERT_EQ(a.verdicts.at(0).id, "gpu-p2p-spin");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, (std::vector<int>{0, 1, 2, 3}));
  const auto& evidence = a.verdicts[0].evidence;
  EXPECT_TRUE(std::any_of(evidence.begin(), evidence.end(), [](const std::string& e) {
    return e.find("cache.gpu_p2p[0]: /root/.cache/vllm/gpu_p2p_access_cache_for_0,1,2,3.json") !=
           std::string::npos;
  }));
  // Near misses: the same frames while waiting (no CPU), or one rank elsewhere.
  JobBuilder waiting(4);
  for (int r = 0; r < 4; ++r) waiting.rank(r, p2p_spin(), 'S', 0);
  EXPECT_FALSE(evaluate(builtin("gpu-p2p-spin"), diagnosis::diagnose(waiting.bundle()).jobs[0]));
  JobBuilder one_elsewhere(4);
  for (int r = 0; r < 4; ++r) {
    one_elsewhere.rank(r, r == 3 ? barrier_stack() : p2p_spin(), r == 3 ? 'S' : 'R',
                       r == 3 ? 0 : 40);
  }
  EXPECT_FALSE(
      evaluate(builtin("gpu-p2p-spin"), diagnosis::diagnose(one_elsewhere.bundle()).jobs[0]));
}

TEST(Rules, ShmBroadcastSkipNeedsAFullDevShm) {
  const auto bundle = scenarios()["shm-broadcast-skip"]();
  const auto a = analyse_with(bundle);
  ASSERT_EQ(a.verdicts.at(0).id, "shm-broadcast-skip");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{0});
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{1, 2, 3}));
  // Near miss: the same stacks with plenty of room in /dev/shm (known false).
  JobBuilder roomy(4);
  for (int r = 0; r < 4; ++r) roomy.rank(r, r == 0 ? shm_source_skipped() : shm_broadcast_wait());
  roomy.fact(0, "shm.free_bytes", "25276063744");
  EXPECT_FALSE(
      evaluate(builtin("shm-broadcast-skip"), diagnosis::diagnose(roomy.bundle()).jobs[0]));
  // Unknown /dev/shm (not captured): fires, with lower confidence, and says so.
  JobBuilder unknown(4);
  for (int r = 0; r < 4; ++r) unknown.rank(r, r == 0 ? shm_source_skipped() : shm_broadcast_wait());
  const auto v =
      evaluate(builtin("shm-broadcast-skip"), diagnosis::diagnose(unknown.bundle()).jobs[0]);
  ASSERT_TRUE(v);
  EXPECT_LT(v->confidence, builtin("shm-broadcast-skip").confidence);
  EXPECT_TRUE(std::any_of(v->evidence.begin(), v->evidence.end(), [](const std::string& e) {
    return e.rfind("fact unknown (not read as false): /dev/shm", 0) == 0;
  }));
}

TEST(Rules, AsymmetricWarmupNamesTheColdRank) {
  const auto bundle = scenarios()["asymmetric-warmup"]();
  const auto a = analyse_with(bundle);
  ASSERT_EQ(a.verdicts.at(0).id, "asymmetric-warmup");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{1});
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 2, 3}));
  // Near miss: the compiling rank's cache is warm (something else makes it slow).
  JobBuilder warm(4);
  for (int r = 0; r < 4; ++r) {
    warm.rank(r, r == 1 ? warmup_compiling() : warmup_waiting(), r == 1 ? 'R' : 'S',
              r == 1 ? 40 : 0)
        .fact(r, "cache.torch_compile.state", "warm");
  }
  EXPECT_FALSE(evaluate(builtin("asymmetric-warmup"), diagnosis::diagnose(warm.bundle()).jobs[0]));
}

TEST(Rules, DpDummyBatchDesyncNamesTheIdleEngine) {
  const auto bundle = scenarios()["dp-dummy-batch-desync"]();
  const auto a = analyse_with(bundle);
  ASSERT_EQ(a.verdicts.at(0).id, "dp-dummy-batch-desync");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{2});
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 1, 3}));
  // Near miss: every engine in the DP all-reduce (the hang is elsewhere).
  JobBuilder all_in(4);
  for (int r = 0; r < 4; ++r) all_in.rank(r, dp_in_sync());
  EXPECT_FALSE(
      evaluate(builtin("dp-dummy-batch-desync"), diagnosis::diagnose(all_in.bundle()).jobs[0]));
}

TEST(Rules, MalformedFilesNameTheLineAndTheReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\n  \"id\": \"x\",\n  \"title\": \"t\",,\n}", "f.json:3: not valid JSON"},
      {"{\n  \"id\": \"Bad Id\",\n  \"title\": \"t\"\n}", "f.json:2: the id must be kebab-case"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"frames\": [{\"function\": \"f\"}]}},\n \"colour\": 1}",
       "f.json:3: unknown key `colour`"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\",\n \"diverged\": \"b\",\n"
       " \"groups\": {\"a\": {\"states\": [\"waiting\"]}}}",
       "f.json:2: no group named `b`"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"states\": [\"asleep\"]}}}",
       "f.json:2: unknown rank state `asleep`"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"frames\": [{\"function_regex\": \"(\"}]}}}",
       "f.json:2: bad function_regex"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"states\": [\"waiting\"], \"processes\": \"workers\"}}}",
       "f.json:2: `processes` must be ranks or others"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\",\n \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"states\": [\"waiting\"], \"processes\": \"others\"}}}",
       "f.json:2: `diverged` must name a group of ranks"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"states\": [\"waiting\"]}},\n"
       " \"facts\": [{\"name\": \"n\", \"fact\": \"shm.free_bytes\", \"matches\": \"[\"}]}",
       "f.json:3: bad regex `[`"},
      // A fact no capture records would never be known: the rule could never fire.
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"states\": [\"waiting\"]}},\n"
       " \"facts\": [{\"name\": \"n\", \"fact\": \"shm.free_byte\", \"below\": \"1\"}]}",
       "f.json:3: fact `n` reads `shm.free_byte`, which no capture records"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"states\": [\"waiting\"]}},\n"
       " \"show_facts\": [\"cache.flashinfer\", \"caches\"]}",
       "f.json:3: `caches` names no fact hangscope records"},
      // `explains` names built-in verdicts (analysis/verdict_ids.h); a typo would explain nothing.
      {"{\"id\": \"my-rule\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"states\": [\"waiting\"]}},\n"
       " \"explains\": [\"rank-straggler\", \"rank-stragler\"]}",
       "f.json:3: rule `my-rule` explains `rank-stragler`, which is no built-in verdict's id"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"states\": [\"waiting\"],\n \"post_mortem\": {}}}}",
       "f.json:3: `post_mortem` of group `a` has no condition"},
      {"{\"id\": \"x\", \"title\": \"t\", \"summary\": \"s\", \"diverged\": \"a\",\n"
       " \"groups\": {\"a\": {\"states\": [\"waiting\"],\n \"post_mortem\": {\"logs\": []}}}}",
       "f.json:3: unknown key `logs` in `post_mortem` of group `a`"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      parse_rule(text, "f.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(expected, 0), 0u) << e.what();
    }
  }
}

// The list of verdict ids (analysis/verdict_ids.h) that `explains` is checked against: every
// built-in rule explains ids of it, and it holds no rule's id.
TEST(VerdictIds, BuiltinRulesExplainListedIdsOnly) {
  EXPECT_TRUE(analysis::verdict_ids::is_builtin("collective-behind"));
  EXPECT_FALSE(analysis::verdict_ids::is_builtin("autotune-cache-mismatch"));
  EXPECT_FALSE(analysis::verdict_ids::is_builtin(""));
  const auto set = load_rules("", "");
  EXPECT_TRUE(set.errors.empty());
  for (const auto& rule : set.rules) {
    EXPECT_FALSE(analysis::verdict_ids::is_builtin(rule.id)) << rule.id;
    for (const auto& id : rule.explains) {
      EXPECT_TRUE(analysis::verdict_ids::is_builtin(id)) << rule.id << ": " << id;
    }
  }
}

// Code reads whether a ring was read from its status fact, never from the wording of `shm_ring`;
// a snapshot before 2.4, which has no status, is read by the text it wrote then.
TEST(FactKeys, TheRingsStatusIsAFactOfItsOwn) {
  using model::ShmRingStatus;
  using namespace model::fact_keys;
  std::map<std::string, std::string> facts;
  EXPECT_FALSE(model::shm_ring_status(facts));
  facts[kShmRing] = "not recognised as a ring, whatever the wording";
  facts[kShmRingStatus] = "ok";
  EXPECT_EQ(model::shm_ring_status(facts), ShmRingStatus::kOk);
  facts[kShmRing] = "psm_1a2b (10 blocks of 10 MiB)";
  facts[kShmRingStatus] = "unrecognised";
  EXPECT_EQ(model::shm_ring_status(facts), ShmRingStatus::kUnrecognised);
  facts.erase(kShmRingStatus);
  EXPECT_EQ(model::shm_ring_status(facts), ShmRingStatus::kOk);
  facts[kShmRing] = "not recognised: bad header";
  EXPECT_EQ(model::shm_ring_status(facts), ShmRingStatus::kUnrecognised);
  EXPECT_TRUE(is_known_fact_key(kShmRingStatus));
}

// The catalog of fact keys (model/fact_keys.h) that rules are checked against.
TEST(FactKeys, KnownKeysListsAndPrefixes) {
  using namespace model::fact_keys;
  for (const std::string& key :
       {std::string(kShmFreeBytes), version("vllm"), indexed(kCacheGpuP2p, 3),
        std::string("cache.flashinfer_autotune[*]"), net_variable("NCCL_SOCKET_IFNAME"),
        std::string(kNcclRasStatus)}) {
    EXPECT_TRUE(is_known_fact_key(key)) << key;
  }
  for (const std::string_view key : {"shm.free", "version.", "cache.gpu_p2p", "cache.gpu_p2p[x]",
                                     "cache.gpu_p2p[]", "net.MASTER_ADDR", "", "gpu"}) {
    EXPECT_FALSE(is_known_fact_key(key)) << key;
  }
  for (const std::string_view prefix :
       {"cache.gpu_p2p", "gpu", "gpu.", "version.torch", "shm", "net."}) {
    EXPECT_TRUE(is_known_fact_prefix(prefix)) << prefix;
  }
  for (const std::string_view prefix : {"", "caches", "gpus", "env."}) {
    EXPECT_FALSE(is_known_fact_prefix(prefix)) << prefix;
  }
}

TEST(Rules, LaterDirectoriesReplaceRulesWithTheSameIdAndAddNewOnes) {
  const auto system = testing::temp_path("rules-system");
  const auto extra = testing::temp_path("rules-extra");
  ::mkdir(system.c_str(), 0755);
  ::mkdir(extra.c_str(), 0755);
  const std::string custom =
      R"({"id": "store-key-never-set", "title": "A rank waits for a store key", "confidence": 0.7,
          "groups": {"stuck": {"wait_kinds": ["store"]}, "others": {"wait_kinds": ["collective"]}},
          "diverged": "stuck", "waiting": "others",
          "summary": "Rank {stuck} waits for a store key in {stuck.where}."})";
  std::ofstream(system + "/a.json") << custom;
  std::ofstream(extra + "/b.json")
      << R"({"id": "autotune-cache-mismatch", "title": "overridden", "summary": "s",
             "diverged": "a", "groups": {"a": {"states": ["stopped"]}}})";
  std::ofstream(extra + "/broken.json") << "{";
  const auto set = load_rules(system, extra);
  ASSERT_EQ(set.errors.size(), 1u);
  EXPECT_NE(set.errors[0].find("broken.json:1: not valid JSON"), std::string::npos);
  std::map<std::string, const Rule*> by_id;
  for (const auto& r : set.rules) by_id[r.id] = &r;
  EXPECT_EQ(by_id.at("autotune-cache-mismatch")->title, "overridden");
  ASSERT_TRUE(by_id.count("store-key-never-set"));
  // The user's rule fires without recompiling.
  const auto bundle = scenarios()["store-wait"]();
  const auto a = diagnosis::diagnose(bundle, set);
  EXPECT_EQ(a.verdicts.at(0).id, "store-key-never-set");
  EXPECT_EQ(a.verdicts[0].summary,
            "Rank 3 waits for a store key in store.wait in load_weights "
            "(repro/gloo_barrier_hang.py:37).");
  std::system(("rm -rf " + system + " " + extra).c_str());
}

}  // namespace
}  // namespace hangscope::rules

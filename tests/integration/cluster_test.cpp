// The virtual cluster (tools/testbed/cluster.sh): 2 nodes x 4 real gloo ranks in their own
// network, PID, UTS and mount namespaces, each node with a real agent; diagnose finds every
// rank through the agents' network addresses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "command.h"
#include "target_process.h"
#include "virtual_cluster.h"

namespace hangscope {
namespace {

std::string run(const std::string& command) {
  const auto result = testing::run_command(command);
  return result.out + result.err;
}

TEST(Cluster, TwoNodesOfFourRanksThroughTheAgents) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  testing::VirtualCluster cluster(
      {.nodes = 2, .ranks_per_node = 4, .diverged = 5, .scenario = "store-wait", .variety = true});
  ASSERT_TRUE(cluster.up());
  const auto diagnosis = cluster.diagnose("bundle");
  const auto& report = diagnosis.report;
  // Rank 5 (node1) waits for a store key nobody sets; every other rank of job A waits for it
  // in dist.barrier(). Job B on node1 has its own diverged rank 1.
  EXPECT_EQ(diagnosis.exit_code, 3);
  std::map<std::string, nlohmann::json> verdict_by_job;
  for (const auto& v : report["verdicts"]) verdict_by_job[v["job"]] = v;
  ASSERT_TRUE(verdict_by_job.count("198.51.100.1:29500")) << report["verdicts"].dump(1);
  const auto& verdict = verdict_by_job["198.51.100.1:29500"];
  EXPECT_EQ(verdict["id"], "rank-diverged");
  EXPECT_EQ(verdict["diverged_ranks"], nlohmann::json::array({5}));
  EXPECT_EQ(verdict["waiting_ranks"], nlohmann::json::array({0, 1, 2, 3, 4, 6, 7}));
  EXPECT_EQ(verdict_by_job["198.51.100.2:29600"]["diverged_ranks"], nlohmann::json::array({1}));
  ASSERT_EQ(report["nodes"].size(), 2u);
  for (const auto& node : report["nodes"]) EXPECT_EQ(node["status"], "ok") << node.dump();
  std::vector<nlohmann::json> job_a, job_b;
  for (const auto& r : report["ranks"]) {
    if (r["job"] == "198.51.100.1:29500") job_a.push_back(r);
    if (r["job"] == "198.51.100.2:29600") job_b.push_back(r);
  }
  ASSERT_EQ(report["ranks"].size(), 10u) << report.dump(1);
  ASSERT_EQ(job_a.size(), 8u);
  for (int rank = 0; rank < 8; ++rank) {
    const auto& r = job_a[static_cast<std::size_t>(rank)];
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(r["rank"], rank);
    EXPECT_EQ(r["world_size"], 8);
    EXPECT_EQ(r["node"], "node" + std::to_string(rank / 4));  // each node's own hostname
    EXPECT_EQ(r["local_rank"], rank % 4);
    ASSERT_FALSE(r["wait_point"].is_null());
    if (rank == 5) {
      EXPECT_EQ(r["wait_point"]["function"], "load_weights");
      EXPECT_NE(r["wait_point"]["file"].get<std::string>().find("tools/repro/gloo_barrier_hang.py"),
                std::string::npos);
    } else {
      EXPECT_EQ(r["wait_point"]["function"], "barrier");
      EXPECT_NE(
          r["wait_point"]["file"].get<std::string>().find("torch/distributed/distributed_c10d.py"),
          std::string::npos);
    }
  }
  // Rank 6 was retitled with setproctitle: its rank comes from its process groups in memory (the
  // environment, also read from memory, says the same).
  EXPECT_EQ(job_a[6]["identity_source"], "memory:process-group");
  EXPECT_EQ(job_a[6]["title"], "VLLM::Worker_TP2");
  EXPECT_EQ(job_a[6]["tp"], 2);
  EXPECT_EQ(job_a[6]["identity_sources"]["tp"], "title");
  EXPECT_EQ(job_a[6]["identity_sources"]["rank"], "memory:process-group");
  EXPECT_EQ(job_a[6]["identity_sources"]["local_rank"], "memory-env");
  // A second job on node1 is its own job, never mixed with the first.
  ASSERT_EQ(job_b.size(), 2u);
  EXPECT_EQ(job_b[0]["rank"], 0);
  EXPECT_EQ(job_b[1]["rank"], 1);
  EXPECT_EQ(job_b[0]["node"], "node1");
  // Rank 4's helper child and a Python process that is no rank.
  int helpers = 0, unidentified = 0;
  for (const auto& p : report["processes"]) {
    if (p["role"] == "helper" && p["node"] == "node1" && p["helper_of"] == job_a[4]["pid"])
      ++helpers;
    if (p["role"] == "unidentified" && p["node"] == "node1") ++unidentified;
  }
  EXPECT_EQ(helpers, 1) << report["processes"].dump(1);
  EXPECT_GE(unidentified, 1) << report["processes"].dump(1);
  EXPECT_EQ(report["samples"], 6);  // 3 samples of each node

  // A wrong token is refused by every node, and nothing leaks.
  const std::string wrong = testing::temp_path("wrong-token");
  std::ofstream(wrong) << "not-the-token\n";
  const auto refused = cluster.diagnose("bundle2", "", wrong).report;
  ::unlink(wrong.c_str());
  for (const auto& node : refused["nodes"]) EXPECT_EQ(node["status"], "refused") << node.dump();
  EXPECT_TRUE(refused["ranks"].empty());

  // A network partition: node1's link to the bridge goes down while its agent runs. diagnose
  // reports node1 unreachable within its deadline and still gives node0's ranks; once the link
  // is back, node1 answers again.
  const std::string hash = run("realpath -m " + cluster.dir() + " | md5sum | cut -c1-6");
  const std::string veth = "vhs" + hash.substr(0, 6) + "n1";
  ASSERT_EQ(testing::run_command("ip link set " + veth + " down").exit_code, 0) << veth;
  const auto cut_begin = std::chrono::steady_clock::now();
  const auto cut = cluster.diagnose("bundle-partition").report;
  const auto cut_took = std::chrono::steady_clock::now() - cut_begin;
  ASSERT_EQ(testing::run_command("ip link set " + veth + " up").exit_code, 0);
  std::map<std::string, std::string> cut_status;
  for (const auto& node : cut["nodes"])
    cut_status[node["address"].get<std::string>()] = node["status"];
  EXPECT_EQ(cut_status["198.51.100.1:7447"], "ok");
  EXPECT_EQ(cut_status["198.51.100.2:7447"], "unreachable") << cut["nodes"].dump();
  EXPECT_LT(cut_took, std::chrono::seconds(45));
  int cut_known = 0;
  for (const auto& r : cut["ranks"]) cut_known += r["state"] != "unknown" ? 1 : 0;
  EXPECT_GE(cut_known, 4);
  EXPECT_EQ(cut["verdicts"][0]["id"], "node-unreachable");
  bool healed = false;
  for (int attempt = 0; attempt < 5 && !healed; ++attempt) {
    const auto again = cluster.diagnose("bundle-healed").report;
    healed = true;
    for (const auto& node : again["nodes"]) healed = healed && node["status"] == "ok";
  }
  EXPECT_TRUE(healed);

  // node1's agent dies: node1 is unreachable, node0's ranks are still reported.
  run("pkill -KILL -f 'collect --listen 198.51.100.2:7447'");
  const auto partial = cluster.diagnose("bundle3").report;
  std::map<std::string, std::string> status;
  for (const auto& node : partial["nodes"])
    status[node["address"].get<std::string>()] = node["status"];
  EXPECT_EQ(status["198.51.100.1:7447"], "ok");
  EXPECT_EQ(status["198.51.100.2:7447"], "unreachable");
  // (f) node1's ranks are unknown, not dead: node-unreachable covers them, and node0's ranks
  // wait for them.
  std::vector<nlohmann::json> known, unknown;
  for (const auto& r : partial["ranks"]) (r["state"] == "unknown" ? unknown : known).push_back(r);
  EXPECT_EQ(known.size(), 4u);
  EXPECT_EQ(unknown.size(), 4u);
  for (const auto& r : known) EXPECT_EQ(r["node"], "node0");
  ASSERT_FALSE(partial["verdicts"].empty());
  EXPECT_EQ(partial["verdicts"][0]["id"], "node-unreachable");
  EXPECT_EQ(partial["verdicts"][0]["diverged_ranks"], nlohmann::json::array({4, 5, 6, 7}));
  EXPECT_EQ(partial["verdicts"][0]["waiting_ranks"], nlohmann::json::array({0, 1, 2, 3}));
  for (const auto& v : partial["verdicts"]) EXPECT_NE(v["id"], "rank-dead") << v.dump();
}

// The pid a process of `node` announced ("<prefix> pid P <suffix>") in the node's log (inside
// its PID namespace, where its agent sees it); 0 if none.
int announced(const std::string& dir, const std::string& prefix, const std::string& suffix,
              const std::string& node = "node0") {
  const std::regex line("^" + prefix + " pid ([0-9]+)" + suffix);
  std::ifstream in(dir + "/" + node + ".log");
  std::string text;
  std::smatch match;
  while (std::getline(in, text)) {
    if (std::regex_search(text, match, line)) return std::stoi(match[1]);
  }
  return 0;
}

// Issue 23: a vLLM V1 server (tools/repro/serving_chain.py) whose API server has 37 requests in
// flight, its engine core stepping over the shm broadcast ring, and 4 gloo workers of which
// rank 3 is stuck in its KV connector's wait_for_save. The user sees a stuck API server; the
// report's first line names worker rank 3, and the chain leads there from the front.
// The API server's request tasks come from the asyncio task reader (kTaskReaderMerged: they
// must be read).
constexpr bool kTaskReaderMerged = true;

TEST(Cluster, ServingChainNamesTheStuckWorkerBehindTheApiServer) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  testing::VirtualCluster cluster(
      {.nodes = 1, .ranks_per_node = 4, .diverged = 3, .scenario = "serving-chain"});
  ASSERT_TRUE(cluster.up());
  const int worker = announced(cluster.dir(), "rank 3", " stuck");
  const int engine = announced(cluster.dir(), "engine core", " waiting");
  const int api = announced(cluster.dir(), "api server", ": 37 requests in flight");
  ASSERT_NE(worker * engine * api, 0) << "announcements missing in " << cluster.dir();
  const auto d = cluster.diagnose("bundle");
  const auto& report = d.report;
  ASSERT_FALSE(report.is_null());
  EXPECT_EQ(d.exit_code, 3);
  ASSERT_FALSE(report["verdicts"].empty()) << report["conclusion"];
  // From the thread stacks alone: the engine core's busy loop waits for worker 0's answer,
  // worker 0 for rank 3 in the TP all_reduce, rank 3 in wait_for_save.
  const auto& top = report["verdicts"][0];
  EXPECT_EQ(top["id"], "serving-stalled") << top.dump(1);
  EXPECT_EQ(top["diverged_ranks"], nlohmann::json::array({3})) << top.dump(1);
  const std::string summary = top["summary"];
  EXPECT_EQ(
      summary.rfind("Worker rank 3 (node0 pid " + std::to_string(worker) + ") is stuck in ", 0), 0u)
      << summary;
  EXPECT_NE(summary.find("SharedStorageConnector.wait_for_save"), std::string::npos) << summary;
  EXPECT_NE(summary.find("the engine core (node0 pid " + std::to_string(engine) +
                         ") waits in the shm broadcast ring (MessageQueue.acquire_read"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("for worker rank 0, which waits for rank 3 in all_reduce"),
            std::string::npos)
      << summary;
  ASSERT_EQ(report["serving"].size(), 1u) << report["serving"].dump(1);
  const auto& chain = report["serving"][0];
  EXPECT_EQ(chain["roots"], nlohmann::json::array({3}));
  EXPECT_EQ(chain["awaited_workers"], nlohmann::json::array({0}));
  EXPECT_EQ(chain["job_link"], "the engine core's child processes");
  ASSERT_EQ(chain["engines"].size(), 1u);
  EXPECT_EQ(chain["engines"][0]["pid"], engine);
  EXPECT_EQ(chain["engines"][0]["activity"], "blocked");
  EXPECT_EQ(chain["engines"][0]["title"], "VLLM::EngineCore");
  ASSERT_EQ(chain["api_servers"].size(), 1u);
  EXPECT_EQ(chain["api_servers"][0]["pid"], api);
  // The API server is tied to the engine core by the sockets between them (the client's ipc://
  // endpoints, which the engine core connected to), not by parent pids.
  EXPECT_EQ(
      chain["api_servers"][0]["link"].get<std::string>().rfind(
          "connected to engine core node0 pid " + std::to_string(engine) + " over ipc:///", 0),
      0u)
      << chain["api_servers"][0].dump(1);
  // report.md: the worker first, the chain right after the verdict.
  std::ifstream md_file(d.bundle + "/report.md");
  std::stringstream md;
  md << md_file.rdbuf();
  EXPECT_EQ(md.str().rfind("# hangscope: Worker rank 3 (node0 pid " + std::to_string(worker), 0),
            0u)
      << md.str().substr(0, 400);
  EXPECT_NE(md.str().find("## Serving chain"), std::string::npos);
  // Needs the asyncio task reader (issue 23 item 1): the 37 request tasks, pending in every
  // sample, in AsyncLLM.generate, and the summary's front.
  if (kTaskReaderMerged || chain["api_servers"][0]["tasks"].get<int>() > 0) {
    EXPECT_EQ(chain["api_servers"][0]["pending_requests"], 37) << chain.dump(1);
    EXPECT_EQ(chain["api_servers"][0]["stuck_requests"], 37) << chain.dump(1);
    EXPECT_EQ(chain["api_servers"][0]["output_handlers"].get<int>() >= 1, true) << chain.dump(1);
    // The request's coroutine chain goes on through the `async for` of
    // chat_completion_full_generator into the async generator AsyncLLM.generate, where it awaits
    // its RequestOutputCollector, parked in asyncio's Event.wait.
    const std::string wait_in = chain["api_servers"][0]["requests_wait_in"];
    EXPECT_EQ(wait_in.rfind("RequestOutputCollector.get (engine/output_processor.py:", 0), 0u)
        << wait_in;
    EXPECT_NE(wait_in.find(") <- AsyncLLM.generate (engine/async_llm.py:"), std::string::npos)
        << wait_in;
    EXPECT_TRUE(wait_in.ends_with("), awaiting Event.wait")) << wait_in;
    // report.md's serving chain says it in the API server's link.
    EXPECT_NE(md.str().find("request tasks awaiting the engine's output (37 pending in every "
                            "sample) in " +
                            wait_in + "; "),
              std::string::npos)
        << md.str();
    EXPECT_NE(summary.find("the API server (node0 pid " + std::to_string(api) +
                           ") has 37 request tasks awaiting the engine core's output"),
              std::string::npos)
        << summary;
  } else {
    std::cout << "[serving-chain] asyncio tasks not read: the request-task assertions wait for "
                 "the task reader"
              << std::endl;
  }
}

// Issue 23, SGLang across two nodes (tools/repro/sglang_serving.py on each node: `python3 -m
// sglang.launch_server --tp 4 --nnodes 2 --node-rank N --dist-init-addr 198.51.100.1:5000
// --log-level debug`, every process of a node writing the node's log). Node 0's HTTP server
// has 23 requests in flight in its TokenizerManager; scheduler TP3 on node 1 waits forever for
// its hierarchical cache's layer load, TP0-2 wait for it in that layer's all-reduce. The user
// sees a stuck HTTP server on node 0; the report's first line names scheduler rank 3 on node 1.
TEST(Cluster, SglangTwoNodeServingNamesTheStuckScheduler) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  const auto begin = std::chrono::steady_clock::now();
  testing::VirtualCluster cluster(
      {.nodes = 2, .ranks_per_node = 2, .diverged = 3, .scenario = "sglang-serving"});
  ASSERT_TRUE(cluster.up());
  const int stuck = announced(cluster.dir(), "rank 3", " stuck", "node1");
  const int api = announced(cluster.dir(), "api server", ": 23 requests in flight");
  ASSERT_NE(stuck * api, 0) << "announcements missing in " << cluster.dir();
  const auto d = cluster.diagnose("bundle");
  const auto& report = d.report;
  ASSERT_FALSE(report.is_null());
  EXPECT_EQ(d.exit_code, 3) << report["nodes"].dump(1) << report["verdicts"].dump(1);
  // The 4 schedulers are one job, keyed by their tcp:// init address (no MASTER_ADDR, no RANK);
  // nothing else is a rank (the detokenizer, the launchers and the resource trackers share the
  // node's log with the schedulers' "world_size=4 rank=R" lines).
  ASSERT_EQ(report["ranks"].size(), 4u) << report["ranks"].dump(1);
  for (int rank = 0; rank < 4; ++rank) {
    const auto& r = report["ranks"][static_cast<std::size_t>(rank)];
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(r["rank"], rank);
    EXPECT_EQ(r["job"], "198.51.100.1:5000");
    EXPECT_EQ(r["node"], "node" + std::to_string(rank / 2));
    EXPECT_EQ(r["title"], "sglang::scheduler_TP" + std::to_string(rank));
    EXPECT_EQ(r["tp"], rank);
  }
  EXPECT_EQ(report["ranks"][3]["pid"], stuck);
  for (const auto& v : report["verdicts"]) EXPECT_NE(v["id"], "rank-dead") << v.dump();
  // From the request tasks to the schedulers' wait-for graph: scheduler rank 3 first.
  ASSERT_FALSE(report["verdicts"].empty()) << report["conclusion"];
  const auto& top = report["verdicts"][0];
  EXPECT_EQ(top["id"], "serving-stalled") << top.dump(1);
  EXPECT_EQ(top["diverged_ranks"], nlohmann::json::array({3})) << top.dump(1);
  const std::string summary = top["summary"];
  EXPECT_EQ(
      summary.rfind("Scheduler rank 3 (node1 pid " + std::to_string(stuck) + ") is stuck in ", 0),
      0u)
      << summary;
  EXPECT_NE(summary.find("LayerLoadingEvent.wait"), std::string::npos) << summary;
  EXPECT_NE(summary.find("the API server (node0 pid " + std::to_string(api) +
                         ") has 23 request tasks awaiting the ranks of job 198.51.100.1:5000, "
                         "and ranks 0-2 wait for it in all_reduce"),
            std::string::npos)
      << summary;
  // One API server: node 1's launcher (it serves /health only) is none.
  ASSERT_EQ(report["serving"].size(), 1u) << report["serving"].dump(1);
  const auto& chain = report["serving"][0];
  EXPECT_EQ(chain["framework"], "sglang");
  EXPECT_EQ(chain["job"], "198.51.100.1:5000");
  EXPECT_EQ(chain["job_link"], "the API server's child processes");
  EXPECT_EQ(chain["roots"], nlohmann::json::array({3}));
  EXPECT_TRUE(chain["engines"].empty());
  ASSERT_EQ(chain["api_servers"].size(), 1u) << chain.dump(1);
  const auto& server = chain["api_servers"][0];
  EXPECT_EQ(server["node"], "node0");
  EXPECT_EQ(server["pid"], api);
  EXPECT_EQ(server["pending_requests"], 23) << server.dump(1);
  EXPECT_EQ(server["stuck_requests"], 23) << server.dump(1);
  EXPECT_EQ(server["output_handlers"], 1) << server.dump(1);
  // The handler's chain goes on into the tokenizer manager's async generators (generate_request,
  // then the `async for` over _wait_one_response), where it waits for its state's event.
  EXPECT_EQ(server["requests_wait_in"].get<std::string>().rfind(
                "TokenizerManager._wait_one_response (managers/tokenizer_manager.py:", 0),
            0u)
      << server.dump(1);
  // report.md: the stuck scheduler first, the chain right after the verdict.
  std::ifstream md_file(d.bundle + "/report.md");
  std::stringstream md;
  md << md_file.rdbuf();
  EXPECT_EQ(md.str().rfind("# hangscope: Scheduler rank 3 (node1 pid " + std::to_string(stuck), 0),
            0u)
      << md.str().substr(0, 400);
  EXPECT_NE(md.str().find("## Serving chain"), std::string::npos);
  std::cout << "[sglang-serving] up and diagnosed in "
            << std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                                begin)
                   .count()
            << " s" << std::endl;
}

}  // namespace
}  // namespace hangscope

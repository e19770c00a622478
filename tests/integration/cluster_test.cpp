// The virtual cluster (tools/testbed/cluster.sh): 2 nodes x 4 real gloo ranks in their own
// network, PID, UTS and mount namespaces, each node with a real agent; diagnose finds every
// rank through the agents' network addresses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "target_process.h"

namespace hangscope {
namespace {

const std::string kCluster = HANGSCOPE_SOURCE_DIR "/tools/testbed/cluster.sh";

std::string run(const std::string& command, int* exit_code = nullptr) {
  const auto result = testing::run_command(command);
  if (exit_code) *exit_code = result.exit_code;
  return result.out + result.err;
}

// Brings the cluster up for the test and always tears it down.
class Cluster {
 public:
  Cluster() : dir_(testing::temp_path("cluster")) {
    int code = -1;
    const auto log =
        run(kCluster + " up --dir " + dir_ + " --nodes 2 --ranks 4 --diverged 5 --hangscope " +
                HANGSCOPE_BINARY + " 2>&1",
            &code);
    up_ = code == 0;
    if (!up_) ADD_FAILURE() << "cluster did not come up:\n" << log;
  }
  ~Cluster() {
    run(kCluster + " down --dir " + dir_ + " 2>&1");
    run("rm -rf " + dir_);
  }
  bool up() const { return up_; }
  std::string agents() const {
    std::ifstream in(dir_ + "/agents");
    std::string line, all;
    while (std::getline(in, line)) all += (all.empty() ? "" : ",") + line;
    return all;
  }
  std::string token_file() const { return dir_ + "/token"; }
  std::string dir() const { return dir_; }

 private:
  std::string dir_;
  bool up_ = false;
};

nlohmann::json diagnose(const std::string& agents, const std::string& token_file,
                        const std::string& out) {
  const auto text =
      run(std::string(HANGSCOPE_BINARY) + " diagnose --agents " + agents + " --token-file " +
          token_file + " --samples 2 --interval 200ms --json --quiet -o " + out);
  return nlohmann::json::parse(text);
}

TEST(Cluster, TwoNodesOfFourRanksThroughTheAgents) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces need root";
  Cluster cluster;
  ASSERT_TRUE(cluster.up());
  const auto report = diagnose(cluster.agents(), cluster.token_file(), cluster.dir() + "/bundle");
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
  // Rank 6 was retitled with setproctitle: its environment came from memory.
  EXPECT_EQ(job_a[6]["identity_source"], "memory-env");
  EXPECT_EQ(job_a[6]["title"], "VLLM::Worker_TP2");
  EXPECT_EQ(job_a[6]["tp"], 2);
  EXPECT_EQ(job_a[6]["identity_sources"]["tp"], "title");
  EXPECT_EQ(job_a[6]["identity_sources"]["rank"], "memory-env");
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
  EXPECT_EQ(report["samples"], 4);

  // A wrong token is refused by every node, and nothing leaks.
  const std::string wrong = testing::temp_path("wrong-token");
  std::ofstream(wrong) << "not-the-token\n";
  const auto refused = diagnose(cluster.agents(), wrong, cluster.dir() + "/bundle2");
  ::unlink(wrong.c_str());
  for (const auto& node : refused["nodes"]) EXPECT_EQ(node["status"], "refused") << node.dump();
  EXPECT_TRUE(refused["ranks"].empty());

  // node1's agent dies: node1 is unreachable, node0's ranks are still reported.
  run("pkill -KILL -f 'collect --listen 198.51.100.2:7447'");
  const auto partial = diagnose(cluster.agents(), cluster.token_file(), cluster.dir() + "/bundle3");
  std::map<std::string, std::string> status;
  for (const auto& node : partial["nodes"])
    status[node["address"].get<std::string>()] = node["status"];
  EXPECT_EQ(status["198.51.100.1:7447"], "ok");
  EXPECT_EQ(status["198.51.100.2:7447"], "unreachable");
  EXPECT_EQ(partial["ranks"].size(), 4u);  // node0's ranks only
}

}  // namespace
}  // namespace hangscope

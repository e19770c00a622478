// Groups outside torch's registry: how one group is known across processes (its store's key)
// and the job of such a group (engine cores on vLLM's stateless DP group), named by process.
#include "hangscope/model/group_identity.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "analysis_builders.h"
#include "hangscope/diagnosis/diagnose.h"

namespace hangscope {
namespace {

using analysis::testing_builders::native;
using analysis::testing_builders::py;
using analysis::testing_builders::thread;

model::ProcessGroupState stateless_group(const std::string& store, int group_rank, int size) {
  model::ProcessGroupState g;
  g.name = "pg@" + std::to_string(140000 + group_rank);
  g.registered = false;
  g.type = "ProcessGroupGloo";
  g.held_by = "self.dp_group";
  g.store = store;
  g.store_prefixes = {"tcp://10.0.0.1:29550"};  // vLLM's init_method: the DP master's address
  g.size = size;
  g.group_rank = group_rank;
  return g;
}

TEST(GroupIdentity, AStoreIsKnownByTheNodeThatServesItWhateverTheHostIsCalled) {
  model::Bundle bundle;
  model::NodeSnapshot node0;
  node0.node_name = "node0";
  model::ProcessRecord holder;
  holder.facts["net.interfaces"] = "lo 127.0.0.1 ::1, eth0 10.0.0.1 fd00::1";
  node0.processes.push_back(holder);
  bundle.snapshots.push_back(node0);
  const auto book = model::address_book(bundle);
  ASSERT_EQ(book.count("10.0.0.1"), 1u);
  EXPECT_EQ(book.count("127.0.0.1"), 0u);  // every node has it: it names none

  model::ProcessGroupState g;
  g.store = "10.0.0.1:29550";
  g.store_prefixes = {"tcp://10.0.0.1:29550"};
  model::ProcessRecord remote;  // a process on node1 that connected to node0's store
  const std::string key = model::group_store_key(g, "node1", remote, book);
  EXPECT_EQ(key, "node0:29550/tcp://10.0.0.1:29550");

  // The store's own node may hold it as 0.0.0.0 or loopback; a name resolves by the
  // process's connection on the store's port.
  g.store = "0.0.0.0:29550";
  EXPECT_EQ(model::group_store_key(g, "node0", remote, book), key);
  g.store = "127.0.0.1:29550";
  EXPECT_EQ(model::group_store_key(g, "node0", remote, book), key);
  g.store = "rollout-head:29550";
  model::ProcessRecord connected;
  connected.facts["net.tcp"] = "10.0.0.2:41000>10.0.0.1:29550 10.0.0.2:41002>10.0.0.3:29500";
  EXPECT_EQ(model::group_store_key(g, "node1", connected, book), key);
  // Unknown or process-local: no key, the group is not followed across processes.
  g.store.clear();
  EXPECT_EQ(model::group_store_key(g, "node1", connected, book), "");
}

// Four DP engine cores (no rank anywhere) on a stateless DP group served by node0: three wait
// in has_unfinished_dp's all-reduce, DP rank 2's executor waits for its workers.
model::Bundle engines_on_a_stateless_group() {
  const std::string c10d = "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py";
  const std::string parallel = "/srv/vllm/vllm/config/parallel.py";
  const std::string core = "/srv/vllm/vllm/v1/engine/core.py";
  model::Bundle bundle;
  for (int sample = 0; sample < 2; ++sample) {
    for (int node = 0; node < 2; ++node) {
      model::NodeSnapshot snapshot;
      snapshot.node_name = "node" + std::to_string(node);
      snapshot.hostname = snapshot.node_name;
      snapshot.sample_index = sample;
      snapshot.capture_unix_ns = 1'790'000'000'000'000'000 + sample * 1'000'000'000LL;
      for (int local = 0; local < 2; ++local) {
        const int dp = node * 2 + local;
        model::ProcessRecord p;
        p.pid = 400 + dp;
        p.ppid = 1;
        p.comm = "python3";
        p.state = 'S';
        p.start_time_ticks = 9;
        p.identity.role = model::ProcessRole::kEngine;
        p.identity.title = "VLLM::EngineCore_DP" + std::to_string(dp);
        p.facts["net.interfaces"] = "lo 127.0.0.1, eth0 10.0.0." + std::to_string(node + 1);
        model::ProcessDump dump;
        dump.pid = p.pid;
        dump.python = "3.11.2";
        dump.distributed.emplace();
        dump.distributed->groups.push_back(
            stateless_group(node == 0 ? "0.0.0.0:29550" : "10.0.0.1:29550", dp, 4));
        const std::string label = model::group_label(dump.distributed->groups[0].name);
        std::vector<model::Frame> frames;
        if (dp == 2) {
          frames = {native("__futex_abstimed_wait_common"),
                    py("wait", "/usr/lib/python3.11/threading.py", 320),
                    py("collective_rpc", "/srv/vllm/vllm/v1/executor/multiproc_executor.py", 250),
                    py("step", core, 180, {{"self", "<DPEngineCoreProc>"}}),
                    py("run_busy_loop", core, 190, {{"self", "<DPEngineCoreProc>"}})};
        } else {
          frames = {native("__futex_abstimed_wait_common"),
                    native("c10d::ProcessGroupGloo::AsyncWork::wait"),
                    py("all_reduce", c10d, 1536, {{"group", label}}),
                    py("has_unfinished_dp", parallel, 41, {{"dp_group", label}}),
                    py("_has_global_unfinished_reqs", core, 170),
                    py("run_busy_loop", core, 190, {{"self", "<DPEngineCoreProc>"}})};
        }
        dump.threads.push_back(thread(p.pid, 'S', frames));
        p.dump = std::move(dump);
        snapshot.processes.push_back(std::move(p));
      }
      bundle.snapshots.push_back(std::move(snapshot));
    }
  }
  for (const char* name : {"node0", "node1"}) {
    bundle.nodes.push_back({name, std::string(name) + ":7447", model::NodeState::kOk, "", 0});
  }
  return bundle;
}

TEST(GroupIdentity, EngineCoresOnAStatelessGroupNameTheOneThatWaitsElsewhere) {
  const auto a = diagnosis::diagnose(engines_on_a_stateless_group());
  ASSERT_FALSE(a.verdicts.empty()) << a.conclusion;
  const auto& v = a.verdicts.front();
  EXPECT_NE(v.summary.find("DP rank 2's engine core (node1 pid 402)"), std::string::npos)
      << v.summary;
  const std::string key = "node0:29550/tcp://10.0.0.1:29550";
  EXPECT_EQ(v.job, key);
  int waiting = 0;
  for (const auto& p : v.processes) {
    EXPECT_EQ(p.group, key) << p.node << " pid " << p.pid;
    EXPECT_EQ(p.group_rank, p.pid - 400) << p.node << " pid " << p.pid;
    EXPECT_TRUE(p.job.empty());  // engine cores are in no torch job
    if (p.side == "diverged") {
      EXPECT_EQ(p.pid, 402);
      EXPECT_EQ(p.node, "node1");
    } else {
      ++waiting;
      EXPECT_NE(p.pid, 402);
    }
  }
  EXPECT_EQ(waiting, 3);
}

TEST(GroupIdentity, EngineCoresAllInTheAllReduceAreNoVerdict) {
  auto bundle = engines_on_a_stateless_group();
  // DP rank 2 joins the all-reduce: every member is in it, nobody diverged.
  for (auto& snapshot : bundle.snapshots) {
    for (auto& p : snapshot.processes) {
      if (p.pid != 402) continue;
      auto others = snapshot.processes.back().dump->threads.front().frames;  // DP rank 3's
      others.edit([&](std::vector<model::Frame>& frames) {
        for (auto& f : frames) {
          for (auto& [name, value] : f.locals) {
            if (name == "group" || name == "dp_group") {
              value = model::group_label(p.dump->distributed->groups[0].name);
            }
          }
        }
      });
      p.dump->threads.front().frames = others;
    }
  }
  const auto a = diagnosis::diagnose(bundle);
  for (const auto& v : a.verdicts) {
    EXPECT_TRUE(std::none_of(v.processes.begin(), v.processes.end(), [](const auto& p) {
      return p.side == "diverged";
    })) << v.summary;
  }
}

// RL weight sync: two rollout workers (ranks 0 and 1 of their own job) and the trainer's rank 0
// (another job) as the last rank of a StatelessProcessGroup. The workers wait in broadcast_obj
// for broadcast_from/2/8; the trainer has broadcast 8 objects and saves a checkpoint.
TEST(GroupIdentity, AStatelessGroupLinksTwoJobsAndReadsItsCountersAsProgramOrder) {
  const std::string utils = "/srv/vllm/vllm/distributed/utils.py";
  model::Bundle bundle;
  for (int sample = 0; sample < 2; ++sample) {
    model::NodeSnapshot snapshot;
    snapshot.node_name = "node0";
    snapshot.hostname = "node0";
    snapshot.sample_index = sample;
    snapshot.capture_unix_ns = 1'790'000'000'000'000'000 + sample * 1'000'000'000LL;
    for (int member = 0; member < 3; ++member) {
      const bool trainer = member == 2;
      model::ProcessRecord p;
      p.pid = 700 + member;
      p.ppid = 1;
      p.comm = "python3";
      p.state = 'S';
      p.start_time_ticks = 9;
      p.identity.role = model::ProcessRole::kRank;
      p.identity.rank = trainer ? 0 : member;
      p.identity.world_size = 2;
      p.identity.job = trainer ? "10.0.0.9:29500" : "10.0.0.9:29610";
      p.facts["net.interfaces"] = "lo 127.0.0.1, eth0 10.0.0.9";
      model::ProcessDump dump;
      dump.pid = p.pid;
      dump.python = "3.11.2";
      dump.distributed.emplace();
      auto g = stateless_group(trainer ? "10.0.0.9:51216" : "0.0.0.0:51216", member, 3);
      g.type = "StatelessProcessGroup";
      g.held_by = trainer ? "self.vllm_client.communicator.group" : "self.pynccl_comm.group";
      g.store_prefixes.clear();
      if (trainer) g.counters["broadcast_send"] = 8;
      if (!trainer) g.counters["broadcast_recv_src/2"] = 8;
      dump.distributed->groups.push_back(g);
      const std::string label = model::group_label(g.name);
      std::vector<model::Frame> frames;
      if (trainer) {
        frames = {native("__futex_abstimed_wait_common"),
                  py("save_checkpoint", "/srv/train/trainer.py", 88),
                  py("train", "/srv/train/trainer.py", 40)};
      } else {
        frames = {native("__GI___poll"), native("c10d::TCPStore::doWait"),
                  native("c10d::TCPStore::get"),
                  py("broadcast_obj", utils, 180,
                     {{"self", label}, {"src", "2"}, {"key", "'broadcast_from/2/8'"}}),
                  py("update_named_param", "/srv/trl/trl/scripts/vllm_serve.py", 120)};
      }
      dump.threads.push_back(thread(p.pid, 'S', frames));
      p.dump = std::move(dump);
      snapshot.processes.push_back(std::move(p));
    }
    bundle.snapshots.push_back(std::move(snapshot));
  }
  bundle.nodes.push_back({"node0", "node0:7447", model::NodeState::kOk, "", 0});
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty()) << a.conclusion;
  const auto& v = a.verdicts.front();
  EXPECT_EQ(v.job, "node0:51216");
  EXPECT_EQ(v.jobs, (std::vector<std::string>{"10.0.0.9:29500", "10.0.0.9:29610"}));
  EXPECT_NE(v.summary.find("group rank 2: rank 0 of job 10.0.0.9:29500 (node0 pid 702)"),
            std::string::npos)
      << v.summary;
  EXPECT_TRUE(std::any_of(v.evidence.begin(), v.evidence.end(), [](const std::string& e) {
    return e.find(
               "group rank 2 has sent 8 (broadcast_send counter): it has not reached "
               "broadcast_from/2/8, which group ranks 0,1 wait for") != std::string::npos;
  })) << testing::PrintToString(v.evidence);
}

// A verdict names a few processes a side (16), whatever the job's size: the report stays small.
TEST(GroupIdentity, AVerdictNamesAtMostSixteenProcessesASide) {
  analysis::testing_builders::JobBuilder job(40);
  for (int r = 0; r < 40; ++r) {
    job.rank(r, r == 7 ? analysis::testing_builders::store_wait_stack(7)
                       : analysis::testing_builders::barrier_stack());
  }
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty()) << a.conclusion;
  const auto& v = a.verdicts.front();
  const auto count = [&](const std::string& side) {
    return std::count_if(v.processes.begin(), v.processes.end(),
                         [&](const auto& p) { return p.side == side; });
  };
  EXPECT_EQ(count("diverged"), 1);
  EXPECT_EQ(count("waiting"), 16);
  EXPECT_EQ(v.waiting_ranks.size(), 39u);  // the ranks themselves are all there
  EXPECT_NE(v.summary.find("Rank 7 (node3 pid 1007)"), std::string::npos) << v.summary;
}

}  // namespace
}  // namespace hangscope

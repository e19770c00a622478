// The correlation on hand-built snapshots: wait points, the wait-for graph, every generic
// verdict, the "no divergence" answers, ties, and ranks without Python.
#include "hangscope/analysis/analysis.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <set>

#include "analysis_builders.h"
#include "hangscope/analysis/rank_set.h"
#include "hangscope/collectives/nccl_ras.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/model/fact_keys.h"

namespace hangscope::analysis {
namespace {

using namespace testing_builders;

TEST(RankSet, CompressesRuns) {
  EXPECT_EQ(compress_ranks(std::vector<int>{0, 1, 2, 3, 5, 7, 8, 9}), "0-3,5,7-9");
  EXPECT_EQ(compress_ranks(std::vector<int>{4, 0, 1}), "0,1,4");
  EXPECT_EQ(compress_ranks(std::vector<int>{}), "");
  EXPECT_EQ(compress_ranks(std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15}),
            "0-7,9-15");
}

TEST(RankSet, IntervalsUniteSubtractAndIntersect) {
  RankSet a = RankSet::range(0, 9);
  a.erase(RankSet{3, 4, 7});
  EXPECT_EQ(a.text(), "0-2,5,6,8,9");
  EXPECT_EQ(a.intervals().size(), 3u);
  EXPECT_EQ(a.size(), 7u);
  EXPECT_TRUE(a.contains(6));
  EXPECT_FALSE(a.contains(7));
  EXPECT_FALSE(a.contains(-1));
  EXPECT_FALSE(a.contains(10));
  a.insert(3, 4);
  EXPECT_EQ(a.text(), "0-6,8,9");
  a.insert(7);
  EXPECT_EQ(a, RankSet::range(0, 9));
  EXPECT_EQ(RankSet({1, 2, 3, 10}) & RankSet::range(2, 11), (std::vector<int>{2, 3, 10}));
  EXPECT_EQ(RankSet({5, 1}) | RankSet({2, 9, 5}), (std::vector<int>{1, 2, 5, 9}));
  EXPECT_EQ(RankSet::range(0, 9) - RankSet::range(-5, 2) - RankSet::range(8, 20),
            (std::vector<int>{3, 4, 5, 6, 7}));
  EXPECT_TRUE(RankSet::range(0, 5).contains(RankSet{1, 5}));
  EXPECT_FALSE(RankSet::range(0, 5).contains(RankSet{1, 6}));
  EXPECT_TRUE(RankSet{4}.intersects(RankSet::range(0, 4)));
  EXPECT_FALSE(RankSet{5}.intersects(RankSet::range(0, 4)));
  EXPECT_TRUE(RankSet::range(3, 2).empty());
  EXPECT_EQ(RankSet::range(7, 8).text(), "7,8");
  EXPECT_EQ(ranks_text(RankSet{3}), "rank 3");
  EXPECT_EQ(ranks_text(RankSet{3, 4, 5}), "ranks 3-5");
}

TEST(RankSet, TheWholeRangeOfIntIsOneInterval) {
  constexpr int kMax = std::numeric_limits<int>::max();
  constexpr int kMin = std::numeric_limits<int>::min();
  RankSet all = RankSet::range(kMin, kMax);
  EXPECT_EQ(all.size(), std::uint64_t{1} << 32);
  all.erase(RankSet{kMin, 0, kMax});
  EXPECT_EQ(all.intervals().size(), 2u);
  EXPECT_EQ(all.size(), (std::uint64_t{1} << 32) - 3);
  EXPECT_FALSE(all.contains(kMax));
  EXPECT_TRUE(all.contains(kMax - 1));
  RankSet world = RankSet::range(0, kMax - 1) - RankSet{0, 1, 2, 3};
  EXPECT_EQ(world.text(), "4-2147483646");
  EXPECT_NE(world, std::vector<int>{4});  // compared without listing 2^31 ranks
  world.insert(kMax);                     // adjacent at the top of int: one interval
  ASSERT_EQ(world.intervals().size(), 1u);
  EXPECT_EQ(world.intervals()[0].last, kMax);
}

TEST(WaitPoint, BarrierIsACollectiveCalledFromUserCode) {
  const auto t = thread(100, 'S', barrier_stack());
  const auto w = waits::classify_thread(t);
  EXPECT_EQ(w.kind, waits::WaitKind::kCollective);
  EXPECT_EQ(w.operation, "barrier");
  ASSERT_TRUE(w.python);
  EXPECT_EQ(w.python->function, "barrier");
  ASSERT_TRUE(w.caller);
  EXPECT_EQ(w.caller->function, "run_rank");
  EXPECT_EQ(w.caller->line, 70);
}

TEST(WaitPoint, StoreWaitIsFoundInNativeFramesUnderTheUsersFunction) {
  const auto w = waits::classify_thread(thread(100, 'S', store_wait_stack(5)));
  EXPECT_EQ(w.kind, waits::WaitKind::kStore);
  EXPECT_EQ(w.operation, "store.wait");
  ASSERT_TRUE(w.python);
  EXPECT_EQ(w.python->function, "load_weights");
  EXPECT_EQ(w.local("key"), "'weights/5/ready'");
}

TEST(WaitPoint, GenericWaitsAndRunningThreads) {
  EXPECT_EQ(waits::classify_thread(
                thread(1, 'S', {native("__GI___clock_nanosleep"), py("main", "/app/x.py", 3)}))
                .kind,
            waits::WaitKind::kSleep);
  EXPECT_EQ(waits::classify_thread(thread(1, 'S',
                                          {native("__futex_abstimed_wait_common"),
                                           py("wait", "/usr/lib/python3.11/threading.py", 320),
                                           py("main", "/app/x.py", 3)}))
                .operation,
            "wait");
  // A process: the thread running Python matters, not the runtime's idle worker thread.
  model::ProcessDump dump;
  dump.pid = 10;
  dump.threads.push_back(thread(10, 'R', {py("compute_slow_path", "/app/x.py", 9)}));
  dump.threads.push_back(
      thread(11, 'S', {native("gloo::transport::tcp::UnboundBuffer::waitRecv")}));
  const auto w = waits::process_wait_point(dump);
  EXPECT_EQ(w.kind, waits::WaitKind::kCpu);
  EXPECT_EQ(w.tid, 10);
}

// The state is read before the thread is stopped, the stack after: a thread polling with
// time.sleep(0.05) is often read as R between two sleeps and then stopped inside the next one.
// Its stack says where it is (the scenario vllm_worker_dp_stall met this at random).
TEST(WaitPoint, AThreadReadAsRunningButStoppedInASleepSleeps) {
  model::ProcessDump dump;
  dump.pid = 10;
  dump.threads.push_back(thread(10, 'R',
                                {native("__GI___clock_nanosleep"), py("sleep", "<built-in>", 0),
                                 py("prepare_batch", "/app/repro/parallel_job.py", 214)}));
  const auto w = waits::process_wait_point(dump);
  EXPECT_EQ(w.kind, waits::WaitKind::kSleep);
  // Read as R with no wait on its stack: it works.
  dump.threads[0] = thread(10, 'R', {py("prepare_batch", "/app/repro/parallel_job.py", 212)});
  EXPECT_EQ(waits::process_wait_point(dump).kind, waits::WaitKind::kCpu);
}

TEST(WaitPoint, WaitingOnPeersBeatsAnIdleMainThread) {
  model::ProcessDump dump;
  dump.pid = 10;
  dump.threads.push_back(thread(10, 'S', {native("epoll_wait"), py("run", "/app/loop.py", 5)}));
  dump.threads.push_back(thread(12, 'S', barrier_stack()));
  const auto w = waits::process_wait_point(dump);
  EXPECT_EQ(w.kind, waits::WaitKind::kCollective);
  EXPECT_EQ(w.tid, 12);
}

TEST(Verdicts, StoreWaiterIsTheRootNotTheMajority) {
  JobBuilder job(8);
  for (int r = 0; r < 8; ++r) job.rank(r, r == 5 ? store_wait_stack(5) : barrier_stack());
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u) << a.conclusion;
  EXPECT_EQ(a.verdicts[0].id, "rank-diverged");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{5});
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 1, 2, 3, 4, 6, 7}));
  EXPECT_NE(a.conclusion.find("Rank 5"), std::string::npos);
  EXPECT_NE(a.conclusion.find("load_weights"), std::string::npos);
  const auto& job0 = a.jobs.at(0);
  EXPECT_EQ(job0.classes.size(), 2u);
  EXPECT_EQ(job0.classes[0].ranks, (std::vector<int>{0, 1, 2, 3, 4, 6, 7}));
  EXPECT_EQ(job0.find(0)->waits_for, std::vector<int>{5});
  EXPECT_FALSE(job0.find(0)->progress.progressing.value());
}

TEST(Verdicts, BusyRankIsAStragglerWhenItsCpuGrows) {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) {
    if (r == 2) {
      job.rank(r, {py("compute_slow_path", "/app/worker.py", 12)}, 'R', /*cpu_per_sample=*/40);
    } else {
      job.rank(r, barrier_stack());
    }
  }
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].id, "rank-straggler");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{2});
  EXPECT_TRUE(a.jobs[0].find(2)->progress.progressing.value());
  EXPECT_EQ(a.jobs[0].find(2)->state, RankState::kRunning);
}

TEST(Verdicts, StoppedDeadAndUninterruptibleRanks) {
  for (const auto& [state, id] : std::vector<std::pair<char, std::string>>{
           {'T', "rank-stopped"}, {'Z', "rank-dead"}, {'D', "rank-uninterruptible"}}) {
    SCOPED_TRACE(id);
    JobBuilder job(4);
    for (int r = 0; r < 4; ++r) {
      job.rank(r,
               r == 1 ? std::vector<model::Frame>{py("spawn_compiler", "/app/w.py", 3)}
                      : barrier_stack(),
               r == 1 ? state : 'S');
    }
    const auto bundle = job.bundle();  // the analysis points into it
    const auto a = diagnosis::diagnose(bundle);
    ASSERT_FALSE(a.verdicts.empty());
    EXPECT_EQ(a.verdicts[0].id, id);
    EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{1});
    EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 2, 3}));
  }
}

TEST(Verdicts, MissingRankWhenEveryNodeAnswered) {
  JobBuilder job(4);
  for (int r : {0, 1, 3}) job.rank(r, barrier_stack());
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u);
  EXPECT_EQ(a.verdicts[0].id, "rank-dead");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{2});
  EXPECT_EQ(a.jobs[0].find(2), nullptr);  // no entry: a range of the missing ranks
  EXPECT_EQ(a.jobs[0].missing, std::vector<int>{2});
  EXPECT_EQ(a.jobs[0].state_of(2), RankState::kMissing);
}

// A node that answered nothing while another answered is a verdict (exit 3); when no node
// answered at all nothing was looked at: no verdict (a failure, exit 1). Busy is its own kind.
TEST(Verdicts, NodeVerdictsNeedANodeThatAnsweredAndBusyIsNotRefused) {
  model::Bundle none_answered;
  none_answered.nodes.push_back(
      {"node0", "10.0.0.1:7447", model::NodeState::kRefused, "missing or wrong token", 0});
  none_answered.nodes.push_back(
      {"node1", "10.0.0.2:7447", model::NodeState::kUnreachable, "connection refused", 0});
  EXPECT_TRUE(diagnosis::diagnose(none_answered).verdicts.empty());

  model::Bundle one_busy;
  one_busy.nodes.push_back({"node0", "10.0.0.1:7447", model::NodeState::kOk, "", 0});
  one_busy.nodes.push_back(
      {"node1", "10.0.0.2:7447", model::NodeState::kBusy, "agent busy: 8 captures", 0});
  const auto a = diagnosis::diagnose(one_busy);
  ASSERT_EQ(a.verdicts.size(), 1u);
  EXPECT_EQ(a.verdicts[0].id, "node-busy");
  EXPECT_NE(a.verdicts[0].summary.find("was busy"), std::string::npos) << a.verdicts[0].summary;
}

TEST(Verdicts, UnreachableNodeCoversItsRanksInsteadOfRankDead) {
  JobBuilder job(4);
  job.rank(0, barrier_stack());
  job.rank(1, barrier_stack());
  auto bundle = job.bundle();
  bundle.nodes.push_back(
      {"node1", "10.0.0.2:7447", model::NodeState::kUnreachable, "connection refused", 0});
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u) << a.verdicts[0].id;
  EXPECT_EQ(a.verdicts[0].id, "node-unreachable");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(a.jobs[0].state_of(3), RankState::kUnknown);
  EXPECT_EQ(a.jobs[0].missing, (std::vector<int>{2, 3}));
}

TEST(Verdicts, DifferentCollectivesNameTheSmallerSide) {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) job.rank(r, r == 3 ? all_reduce_stack() : barrier_stack());
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u);
  EXPECT_EQ(a.verdicts[0].id, "collective-mismatch");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{3});
}

TEST(Verdicts, ATieIsReportedAsATie) {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) job.rank(r, r >= 2 ? all_reduce_stack() : barrier_stack());
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u);
  EXPECT_EQ(a.verdicts[0].id, "collective-mismatch");
  EXPECT_TRUE(a.verdicts[0].diverged_ranks.empty());
  EXPECT_NE(a.verdicts[0].summary.find("Tie"), std::string::npos);
  EXPECT_LT(a.verdicts[0].confidence, 0.5);
}

TEST(Verdicts, EveryRankProgressingIsNoDivergence) {
  JobBuilder job(4);
  // Caught in the all_reduce at every sample, but the probes between samples found each rank
  // outside it: a step loop.
  for (int r = 0; r < 4; ++r) job.rank(r, all_reduce_stack()).probes(r, 24, 9);
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_TRUE(a.verdicts.empty()) << a.verdicts[0].summary;
  EXPECT_NE(a.conclusion.find("No divergence"), std::string::npos);
  EXPECT_NE(a.conclusion.find("every rank (4) is progressing"), std::string::npos);
  EXPECT_NE(a.jobs[0].ranks[0].progress.detail.find("left its wait in 18 of 48 probes"),
            std::string::npos)
      << a.jobs[0].ranks[0].progress.detail;
}

// The compute of a decode step: no waiting primitive, on CPU.
std::vector<model::Frame> forward_stack() {
  return {native("at::native::addmm_out"), py("forward", kUser, 51), py("decode_step", kUser, 88),
          py("<module>", kUser, 120)};
}

// Issue 32's false alarm: a healthy job whose step is an all_reduce and 20 ms of host work. The
// samples catch rank 0 in the all_reduce each time (no CPU: it waits for its peers), and its
// peers on CPU between steps. Only the evidence between samples tells it from a rank that waits
// for a straggler.
TEST(Verdicts, AStepLoopCaughtInItsCollectiveAtEverySampleIsNoStraggler) {
  const auto job_with = [](const std::function<void(JobBuilder&)>& evidence) {
    JobBuilder job(4);
    job.rank(0, all_reduce_stack()).wakeups(0, 60);
    for (int r = 1; r < 4; ++r) job.rank(r, forward_stack(), 'R', /*cpu_per_sample=*/30);
    evidence(job);
    return job.bundle();
  };
  {  // probes found rank 0 outside the all_reduce
    const auto bundle = job_with([](JobBuilder& j) { j.probes(0, 24, 6); });
    const auto a = diagnosis::diagnose(bundle);
    EXPECT_TRUE(a.verdicts.empty()) << a.verdicts[0].summary;
    EXPECT_EQ(a.jobs[0].ranks[0].progress.progressing, true);
  }
  {  // no probes, but the world group's sequence number advanced
    const auto bundle = job_with([](JobBuilder& j) {
      model::DistributedState state;
      state.groups = {pg("0", {0, 1, 2, 3}, 0, 1804289383)};
      j.distributed(0, state).sequence_step(0, 50);
    });
    const auto a = diagnosis::diagnose(bundle);
    EXPECT_TRUE(a.verdicts.empty()) << a.verdicts[0].summary;
    EXPECT_NE(a.jobs[0].ranks[0].progress.detail.find("sequence number advanced by 100"),
              std::string::npos)
        << a.jobs[0].ranks[0].progress.detail;
  }
  {  // no evidence of leaving: it waits, and its peers that work are the stragglers
    const auto bundle = job_with([](JobBuilder& j) {
      j.probes(0, 24, 0);
      model::DistributedState state;
      state.groups = {pg("0", {0, 1, 2, 3}, 0, 1804289383)};
      j.distributed(0, state);
    });
    const auto a = diagnosis::diagnose(bundle);
    ASSERT_FALSE(a.verdicts.empty());
    EXPECT_EQ(a.verdicts[0].id, "rank-straggler");
    EXPECT_NE(a.jobs[0].ranks[0].progress.detail.find("in its wait at all 48 probes"),
              std::string::npos)
        << a.jobs[0].ranks[0].progress.detail;
  }
}

TEST(Verdicts, EveryRankStuckInOneCollectiveIsATransportStall) {
  JobBuilder job(4);
  model::DistributedState state;
  state.groups = {pg("0", {0, 1, 2, 3}, std::nullopt, 1804289391)};
  for (int r = 0; r < 4; ++r) {
    state.groups[0].group_rank = r;
    job.rank(r, barrier_stack()).probes(r, 24, 0).distributed(r, state);
  }
  auto bundle = job.bundle();  // the analysis points into it
  // Rank 2's connection to rank 0 holds bytes the peer never acknowledged.
  model::Socket socket;
  socket.family = model::Socket::Family::kTcp;
  socket.state = model::SocketState::kEstablished;
  socket.local = "203.0.113.2:41000";
  socket.remote = "203.0.113.1:38000";
  socket.tx_queue = 1024;
  socket.retransmits = 3;
  for (auto& s : bundle.snapshots) {
    for (auto& p : s.processes) {
      if (p.identity.rank == 2) p.dump->sockets.push_back(socket);
    }
  }
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u) << a.conclusion;
  const auto& v = a.verdicts[0];
  EXPECT_EQ(v.id, "collective-transport");
  EXPECT_TRUE(v.diverged_ranks.empty());
  EXPECT_EQ(v.waiting_ranks, RankSet::range(0, 3));
  EXPECT_NE(v.summary.find("Every rank of process group 0 (ranks 0-3) waits in barrier"),
            std::string::npos)
      << v.summary;
  std::string evidence;
  for (const auto& line : v.evidence) evidence += line + "\n";
  EXPECT_NE(evidence.find("sequence number unchanged at 1804289391"), std::string::npos)
      << evidence;
  EXPECT_NE(evidence.find("none of 192 probes"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("rank 2 (node1): 1024 bytes sent that the peer has not acknowledged "
                          "and 3 retransmission timeouts on its TCP connections to 203.0.113.1"),
            std::string::npos)
      << evidence;
  EXPECT_EQ(v.membership, "memory");
}

TEST(Verdicts, OneRankLeavingTheCollectiveIsNoTransportStall) {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) job.rank(r, barrier_stack()).probes(r, 24, r == 2 ? 3 : 0);
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  for (const auto& v : a.verdicts) EXPECT_NE(v.id, "collective-transport") << v.summary;
}

TEST(Verdicts, ARankOnCpuInACollectiveWithoutASequenceNumberIsUndecided) {
  JobBuilder job(2);
  // A loop with no pause (or a wait that spins): on CPU in the all_reduce at every look.
  for (int r = 0; r < 2; ++r) job.rank(r, all_reduce_stack(), 'R', 30).probes(r, 24, 0);
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_TRUE(a.verdicts.empty()) << a.verdicts[0].summary;
  EXPECT_FALSE(a.jobs[0].ranks[0].progress.progressing.has_value());
  EXPECT_NE(a.jobs[0].ranks[0].progress.undecided.find("no sequence number"), std::string::npos);
  EXPECT_EQ(a.conclusion.rfind("No verdict on job 127.0.0.1:29500: no rank could be told", 0), 0u)
      << a.conclusion;
  EXPECT_NE(a.conclusion.find("Ranks 0,1 are undecided: on CPU inside all_reduce"),
            std::string::npos)
      << a.conclusion;
}

TEST(Verdicts, ARankOnCpuInACollectiveWhoseSequenceNumberStandsStillWaits) {
  // NCCL's wait spins on CPU while stuck: the sequence number decides.
  JobBuilder job(2);
  model::DistributedState state;
  state.groups = {pg("0", {0, 1}, std::nullopt, 7)};
  for (int r = 0; r < 2; ++r) {
    job.rank(r, all_reduce_stack(), 'R', 30).probes(r, 24, 0).distributed(r, state);
  }
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u) << a.conclusion;
  EXPECT_EQ(a.verdicts[0].id, "collective-transport");
  EXPECT_EQ(a.jobs[0].ranks[0].state, RankState::kWaiting);
}

TEST(Verdicts, RanksWithoutPython) {
  JobBuilder job(3);
  const std::vector<model::Frame> gloo = {native("__futex_abstimed_wait_common"),
                                          native("gloo::transport::tcp::UnboundBuffer::waitRecv"),
                                          native("gloo::barrier"), native("main")};
  job.rank(0, gloo);
  job.rank(1, gloo);
  job.rank(2, {native("__GI___clock_nanosleep"), native("main")});
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u);
  EXPECT_EQ(a.verdicts[0].id, "rank-diverged");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{2});
}

TEST(Verdicts, PipelineGraphNamesTheStuckEarlyStageRankNotTheMajority) {
  // Stage 0 = ranks 0-3, stage 1 = ranks 4-7. Rank 1 is stuck in a lock; 0,2,3 sent and wait in
  // their stage's barrier; every stage-1 rank waits in recv from its stage-0 peer.
  JobBuilder job(8);
  for (int r = 0; r < 8; ++r) {
    if (r == 1) {
      job.rank(r, {native("__futex_abstimed_wait_common"),
                   py("prepare_microbatch", "/app/pipeline.py", 40)});
    } else if (r < 4) {
      job.rank(r, {native("gloo::barrier"),
                   py("barrier", kC10d, 3152, {{"group", "<ProcessGroupGloo>"}}),
                   py("stage_barrier", "/app/pipeline.py", 50, {{"ranks", "[0, 1, 2, 3]"}}),
                   py("run", "/app/pipeline.py", 80)});
    } else {
      job.rank(r, {native("gloo::transport::tcp::UnboundBuffer::waitRecv"),
                   py("recv", kC10d, 1630, {{"src", std::to_string(r - 4)}}),
                   py("receive_activations", "/app/pipeline.py", 60),
                   py("run", "/app/pipeline.py", 85)});
    }
  }
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{1});
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(a.jobs[0].find(5)->waits_for, std::vector<int>{1});
  EXPECT_EQ(a.jobs[0].find(4)->waits_for, std::vector<int>{0});
  EXPECT_EQ(a.jobs[0].find(0)->waits_for, std::vector<int>{1});  // group from `ranks`
  // The largest class is the recv class, not where the culprit is.
  EXPECT_EQ(a.jobs[0].classes[0].ranks, (std::vector<int>{4, 5, 6, 7}));
}

TEST(Verdicts, StoreBarrierWithADeadRank) {
  // Ranks set "arrive/<rank>" then wait for every key; rank 2 exited before setting its key.
  JobBuilder job(4);
  for (int r : {0, 1, 3}) {
    job.rank(r, {native("c10d::TCPStore::doWait(std::vector<std::string> const&)"),
                 py("store_barrier", "/app/w.py", 30,
                    {{"keys", "['arrive/0', 'arrive/1', 'arrive/2', 'arrive/3']"}})});
  }
  const auto bundle = job.bundle();  // the analysis points into it
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u);
  EXPECT_EQ(a.verdicts[0].id, "rank-dead");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{2});
  EXPECT_EQ(a.jobs[0].find(0)->waits_for, std::vector<int>{2});
}

TEST(Verdicts, TwoJobsAreAnalysedApart) {
  JobBuilder a_job(2, "10.0.0.1:29500");
  a_job.rank(0, barrier_stack());
  a_job.rank(1, store_wait_stack(1));
  JobBuilder b_job(2, "10.0.0.1:29600");  // healthy: a barrier at every step
  b_job.rank(0, barrier_stack()).probes(0, 24, 5);
  b_job.rank(1, barrier_stack()).probes(1, 24, 5);
  auto bundle = a_job.bundle();
  for (auto& s : b_job.bundle().snapshots) {
    for (std::size_t i = 0; i < bundle.snapshots.size(); ++i) {
      if (bundle.snapshots[i].sample_index == s.sample_index) {
        for (auto& p : s.processes) {
          p.pid += 1000;
          bundle.snapshots[i].processes.push_back(p);
        }
      }
    }
  }
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.jobs.size(), 2u);
  ASSERT_EQ(a.verdicts.size(), 1u);
  EXPECT_EQ(a.verdicts[0].job, "10.0.0.1:29500");
}

TEST(WaitPoints, TheArgumentsOfTheWaitingCallComeFromItsLocals) {
  const auto bundle =
      JobBuilder(3)
          .rank(0, store_wait_stack(0))
          .rank(1, {native("c10d::ProcessGroupGloo::AsyncWork::wait"),
                    py("barrier", kC10d, 3152, {{"group", "None"}, {"async_op", "False"}}),
                    py("run_rank", kUser, 70)})
          .rank(2, {native("c10d::ProcessGroupGloo::AsyncWork::wait"),
                    py("all_reduce", kC10d, 1536,
                       {{"group", "<torch._C._distributed_c10d.ProcessGroupGloo>"},
                        {"tensor", "<Tensor>"}}),
                    py("sync_step", kUser, 80, {{"group_ranks", "[0, 2]"}})})
          .bundle();
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_EQ(a.jobs[0].find(0)->wait.arguments(), "key: 'weights/0/ready'");
  EXPECT_EQ(a.jobs[0].find(1)->wait.arguments(), "group: the default group (world)");
  EXPECT_EQ(a.jobs[0].find(2)->wait.arguments(), "group ranks: [0, 2]");
}

std::size_t ras_evidence(const Analysis& a) {
  const auto& evidence = a.verdicts.at(0).evidence;
  return static_cast<std::size_t>(
      std::count_if(evidence.begin(), evidence.end(),
                    [](const std::string& e) { return e.rfind("NCCL RAS (", 0) == 0; }));
}

TEST(Verdicts, NcclRasFindingsAreEvidence) {
  const std::string finding =
      "communicator 0xc3a: rank 3 (process 1003 on 10.0.0.2 (GPU 1)) launched AllReduce up to "
      "41, 3 ranks up to 42";
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) job.rank(r, r == 3 ? store_wait_stack(3) : barrier_stack());
  job.fact(0, model::fact_keys::kNcclRas, "problems: " + finding);
  job.fact(0, model::fact_keys::kNcclRasStatus, "problems");
  job.fact(1, model::fact_keys::kNcclRas, "ok: 1 communicator(s), 4 ranks, nothing reported");
  job.fact(1, model::fact_keys::kNcclRasStatus, "ok");
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  ASSERT_EQ(ras_evidence(a), 1u);
  const auto& evidence = a.verdicts[0].evidence;
  EXPECT_NE(std::find(evidence.begin(), evidence.end(), "NCCL RAS (node0): problems: " + finding),
            evidence.end());
}

// The status fact decides, never the wording of the summary: a reworded summary with the
// status "problems" is evidence; a summary that reads like problems without it (a snapshot of
// an older agent) is not, and neither is an unknown status value.
TEST(Verdicts, NcclRasEvidenceFollowsTheStatusFactNotTheText) {
  const auto analysed = [](const std::string& text, const std::optional<std::string>& status) {
    JobBuilder job(4);
    for (int r = 0; r < 4; ++r) job.rank(r, r == 3 ? store_wait_stack(3) : barrier_stack());
    job.fact(0, model::fact_keys::kNcclRas, text);
    if (status) job.fact(0, model::fact_keys::kNcclRasStatus, *status);
    const auto bundle = job.bundle();
    return ras_evidence(diagnosis::diagnose(bundle));
  };
  EXPECT_EQ(analysed("RAS found: rank 3 behind", "problems"), 1u);
  EXPECT_EQ(analysed("problems: rank 3 behind", std::nullopt), 0u);
  EXPECT_EQ(analysed("problems: rank 3 behind", "ok"), 0u);
  EXPECT_EQ(analysed("problems: rank 3 behind", "unavailable"), 0u);
  EXPECT_EQ(analysed("problems: rank 3 behind", "Problems"), 0u);
}

// Gloo's full mesh between 4 ranks on 2 nodes (ranks 0,1 on 198.51.100.1, 2,3 on .2), each
// connection recorded by both ends, without the pairs listed in `cut`; plus every rank's
// connection to the store (port 29500 on rank 0), which does not count as a peer.
JobBuilder meshed_job(const std::set<std::pair<int, int>>& cut, bool gloo = true) {
  JobBuilder job(4);
  std::map<int, std::string> tcp;
  const auto ip = [](int r) { return std::string(r < 2 ? "198.51.100.1" : "198.51.100.2"); };
  for (int a = 0; a < 4; ++a) {
    tcp[a] += ip(a) + ":" + std::to_string(41000 + a) + ">198.51.100.1:29500 ";
    for (int b = a + 1; b < 4; ++b) {
      if (cut.count({a, b})) continue;
      const std::string ea = ip(a) + ":" + std::to_string(50000 + a * 10 + b);
      const std::string eb = ip(b) + ":" + std::to_string(60000 + a * 10 + b);
      tcp[a] += ea + ">" + eb + " ";
      tcp[b] += eb + ">" + ea + " ";
    }
  }
  for (int r = 0; r < 4; ++r) {
    auto stack = r == 3 ? store_wait_stack(3) : barrier_stack();
    if (!gloo) {  // an NCCL job: the waiters in ncclGroupEnd, no gloo frame anywhere
      for (auto& f : stack) {
        if (f.function.find("Gloo") != std::string::npos) f.function = "ncclGroupEnd";
      }
    }
    job.rank(r, stack).fact(r, "net.tcp", tcp[r]).env(r, "MASTER_PORT", "29500");
  }
  return job;
}

TEST(Network, ARankWithoutTheConnectionsItsPeersHaveIsNamed) {
  const auto bundle = meshed_job({{0, 3}, {1, 3}}).bundle();
  const auto a = diagnosis::diagnose(bundle);
  const auto& job = a.jobs.at(0);
  EXPECT_TRUE(job.tcp_meshed);
  EXPECT_EQ(job.find(3)->missing_tcp_peers, (std::vector<int>{0, 1}));
  EXPECT_EQ(job.find(3)->tcp_peers, std::vector<int>{2});
  EXPECT_EQ(job.find(0)->missing_tcp_peers, std::vector<int>{3});
  EXPECT_TRUE(job.find(2)->missing_tcp_peers.empty());
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{3});
  const auto& evidence = a.verdicts[0].evidence;
  EXPECT_TRUE(std::any_of(evidence.begin(), evidence.end(), [](const std::string& e) {
    return e.rfind("rank 3 has no TCP connection to ranks 0,1, while", 0) == 0;
  }));
}

TEST(Network, WithoutGlooAMissingPairIsNoEvidence) {
  // Only the store connections, as in an NCCL job: no gap is evidence, the store is no peer.
  const auto bundle =
      meshed_job({{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}}, /*gloo=*/false).bundle();
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_FALSE(a.jobs.at(0).tcp_meshed);
  EXPECT_TRUE(a.jobs[0].find(3)->tcp_known);
  EXPECT_TRUE(a.jobs[0].find(3)->missing_tcp_peers.empty());
  EXPECT_TRUE(a.jobs[0].find(0)->tcp_peers.empty());  // the store is not a peer
  const auto full = meshed_job({}).bundle();
  const auto b = diagnosis::diagnose(full);
  EXPECT_TRUE(b.jobs.at(0).tcp_meshed);
  EXPECT_EQ(b.jobs[0].find(3)->tcp_peers, (std::vector<int>{0, 1, 2}));
}

// Issue 18's subgroup case: rank 1 skips its TP group's all_reduce (group 1 = {0,1}) and waits in
// the world barrier with ranks 2 and 3; rank 0, its TP peer, waits in the all_reduce. The
// groups come from memory, program order (a later line of `step`) and the sequence numbers name
// rank 1, not the peer it left waiting (the smaller side).
model::DistributedState tp_state(int rank, std::uint64_t tp_sequence) {
  model::DistributedState state;
  state.rank = rank;
  state.world_size = 4;
  state.groups = {
      pg("0", {0, 1, 2, 3}, rank),
      pg(rank < 2 ? "1" : "2", rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, rank % 2,
         tp_sequence)};
  // As a snapshot decodes them: groups of ranks 0..size-1 carry their size only.
  for (auto& g : state.groups) {
    if (g.ranks.front() == 0) g.ranks.clear();
  }
  return state;
}

std::vector<model::Frame> step_stack(const std::string& collective, int line,
                                     const std::string& group) {
  return {native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          py(collective, kC10d, collective == "barrier" ? 3152 : 1536, {{"group", group}}),
          py("step", kUser, line), py("<module>", kUser, 120)};
}

TEST(Membership, ASkippedSubgroupCollectiveNamesTheRankThatSkippedIt) {
  JobBuilder job(4);
  job.rank(0, step_stack("all_reduce", 90, "<process group 1>")).distributed(0, tp_state(0, 11));
  job.rank(1, step_stack("barrier", 95, "None")).distributed(1, tp_state(1, 10));
  for (int r : {2, 3})
    job.rank(r, step_stack("barrier", 95, "None")).distributed(r, tp_state(r, 7));
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].id, "collective-mismatch");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{1}) << a.verdicts[0].summary;
  EXPECT_EQ(a.verdicts[0].membership, "memory");
  EXPECT_DOUBLE_EQ(a.verdicts[0].confidence, 0.9);  // the sequence numbers confirm it
  const auto& r0 = a.jobs[0].ranks[0];
  EXPECT_EQ(r0.waits_for, std::vector<int>{1});  // its TP group only, not ranks 2 and 3
  EXPECT_EQ(r0.group, "1");
}

// The other reading of the same shape: rank 3 alone calls an all_reduce on a group of all four
// ranks (a branch only it takes) and the other three went on to the barrier. Most of the group
// went past, so rank 3 is the one that diverged, not the three.
TEST(Membership, ACollectiveOnlyOneRankIssuesNamesThatRank) {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) {
    model::DistributedState state;
    state.rank = r;
    state.world_size = 4;
    state.groups = {pg("0", {}, r), pg("1", {}, r, r == 3 ? 8 : 7)};
    for (auto& g : state.groups) g.size = 4;
    job.rank(r, r == 3 ? step_stack("all_reduce", 90, "<process group 1>")
                       : step_stack("barrier", 95, "None"))
        .distributed(r, state);
  }
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{3}) << a.verdicts[0].summary;
  EXPECT_DOUBLE_EQ(a.verdicts[0].confidence, 0.9);  // its sequence number is one ahead
}

TEST(Membership, WithoutGroupsTheWholeJobIsAssumedAndSaidSo) {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) job.rank(r, r == 3 ? all_reduce_stack() : barrier_stack());
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u);
  EXPECT_EQ(a.verdicts[0].membership, "assumed");
  EXPECT_LT(a.verdicts[0].confidence, 0.5);
  bool said = false;
  for (const auto& e : a.verdicts[0].evidence) said |= e.find("assumed") != std::string::npos;
  EXPECT_TRUE(said);
}

// Rank 0 hosts the TCPStore and polls for workers (many wake-ups, no CPU), ranks 1 and 3 wait in
// the store-based barrier, rank 2 never started: rank 2 is named, not rank 0.
TEST(InitHang, TheRankThatNeverArrivedIsNamedNotTheStoreHost) {
  JobBuilder job(4);
  const std::vector<std::pair<std::string, std::string>> args = {{"world_size", "4"}};
  job.rank(0, {native("c10d::TCPStore::TCPStore"),
               py("_create_c10d_store",
                  "/usr/lib/python3/dist-packages/torch/distributed/rendezvous.py", 177),
               py("init_process_group", kC10d, 754), py("main", kUser, 30)})
      .wakeups(0, 200);
  for (int r : {1, 3}) {
    job.rank(r, {native("__GI___clock_nanosleep"), py("_store_based_barrier", kC10d, 340),
                 py("init_process_group", kC10d, 761), py("main", kUser, 30)});
  }
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].id, "rank-not-arrived");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{2});
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 1, 3}));
  EXPECT_NE(a.verdicts[0].summary.find("no process on any answering node"), std::string::npos);
  EXPECT_EQ(a.jobs[0].ranks[0].state, RankState::kWaiting);  // polling is waiting
}

// A world of 2^31 - 1 ranks (what a corrupt or hostile snapshot may claim) with four ranks
// present in the default group's barrier, the group's size read from memory: the missing ranks
// are one range from the rank table to the verdict. An entry per claimed rank would be 2^31
// entries (out of memory); this finishes in the time the four ranks take.
constexpr int kHugeWorld = std::numeric_limits<int>::max();

model::DistributedState huge_world_state(int rank) {
  model::DistributedState state;
  state.rank = rank;
  state.world_size = kHugeWorld;
  state.groups = {pg("0", {}, rank)};
  state.groups[0].size = kHugeWorld;  // 0..size-1, as a snapshot carries it
  return state;
}

TEST(Scale, AWorldOfIntMaxRanksIsDiagnosedFromTheRanksPresent) {
  JobBuilder job(kHugeWorld);
  for (int r = 0; r < 4; ++r) {
    job.rank(r, step_stack("barrier", 95, "None")).distributed(r, huge_world_state(r));
  }
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_EQ(a.jobs.size(), 1u);
  const auto& j = a.jobs[0];
  EXPECT_EQ(j.world_size, kHugeWorld);
  EXPECT_EQ(j.ranks.size(), 4u);  // the ranks present only
  EXPECT_EQ(j.missing.text(), "4-2147483646");
  EXPECT_EQ(j.missing.size(), 2147483643u);
  EXPECT_EQ(j.state_of(2147483646), RankState::kMissing);
  EXPECT_EQ(j.state_of(kHugeWorld), std::nullopt);
  EXPECT_EQ(j.find(0)->waits_for.text(), "4-2147483646");  // the default group, from memory
  EXPECT_EQ(j.find(0)->membership, "memory");
  ASSERT_EQ(a.verdicts.size(), 1u) << a.conclusion;
  const auto& v = a.verdicts[0];
  EXPECT_EQ(v.id, "rank-dead");
  EXPECT_EQ(v.diverged_ranks, RankSet::range(4, kHugeWorld - 1));
  EXPECT_EQ(v.waiting_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(v.confidence, 0.85);
  EXPECT_EQ(v.summary.rfind("Ranks 4-2147483646 are missing: no node that answered runs them "
                            "while ranks 0-3 wait for them in barrier",
                            0),
            0u)
      << v.summary;
  bool said = false;
  for (const auto& e : v.evidence) said |= e == "ranks 4-2147483646: state missing";
  EXPECT_TRUE(said);
  EXPECT_EQ(a.conclusion, v.summary);
}

// The same claim without a group in memory: the whole job is assumed to be the group.
TEST(Scale, AWorldOfIntMaxRanksWithTheGroupAssumed) {
  JobBuilder job(kHugeWorld);
  for (int r = 0; r < 3; ++r) job.rank(r, barrier_stack());
  job.rank(5, barrier_stack());
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_EQ(a.jobs.at(0).missing.text(), "3,4,6-2147483646");
  ASSERT_EQ(a.verdicts.size(), 1u) << a.conclusion;
  EXPECT_EQ(a.verdicts[0].id, "rank-dead");
  EXPECT_EQ(a.verdicts[0].membership, "assumed");
  EXPECT_EQ(a.verdicts[0].diverged_ranks.text(), "3,4,6-2147483646");
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 1, 2, 5}));
}

// A node that did not answer in such a world: the ranks nobody captured are unknown, as ranges.
TEST(Scale, AWorldOfIntMaxRanksWithANodeThatDidNotAnswer) {
  JobBuilder job(kHugeWorld);
  for (int r = 0; r < 2; ++r) {
    job.rank(r, step_stack("barrier", 95, "None")).distributed(r, huge_world_state(r));
  }
  auto bundle = job.bundle();
  bundle.nodes.push_back(
      {"node1", "10.0.0.2:7447", model::NodeState::kUnreachable, "connection refused", 0});
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_EQ(a.jobs.at(0).missing_state, RankState::kUnknown);
  ASSERT_EQ(a.verdicts.size(), 1u) << a.conclusion;
  EXPECT_EQ(a.verdicts[0].id, "node-unreachable");
  EXPECT_EQ(a.verdicts[0].diverged_ranks, RankSet::range(2, kHugeWorld - 1));
  EXPECT_EQ(a.verdicts[0].waiting_ranks, (std::vector<int>{0, 1}));
  EXPECT_NE(a.verdicts[0].summary.find("ranks 0,1 wait for ranks 2-2147483646, whose state is "
                                       "unknown"),
            std::string::npos)
      << a.verdicts[0].summary;
}

// Ranks in init_process_group of a world of 2^31 - 1: the ranks that never arrived are a range,
// in the verdict and in its evidence.
TEST(Scale, AnInitHangInAWorldOfIntMaxRanks) {
  JobBuilder job(kHugeWorld);
  for (int r : {0, 1}) {
    job.rank(r, {native("__GI___clock_nanosleep"), py("_store_based_barrier", kC10d, 340),
                 py("init_process_group", kC10d, 761), py("main", kUser, 30)});
  }
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  const auto& v = a.verdicts[0];
  EXPECT_EQ(v.id, "rank-not-arrived");
  EXPECT_EQ(v.diverged_ranks, RankSet::range(2, kHugeWorld - 1));
  EXPECT_EQ(v.waiting_ranks, (std::vector<int>{0, 1}));
  EXPECT_NE(v.summary.find("Ranks 2-2147483646 never arrived in init_process_group"),
            std::string::npos)
      << v.summary;
  bool said = false;
  for (const auto& e : v.evidence) {
    said |= e == "ranks 2-2147483646: no process on any answering node";
  }
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace hangscope::analysis

#include <gtest/gtest.h>

#include "hangscope/identity/environment.h"
#include "hangscope/identity/logs.h"
#include "hangscope/identity/rank_identity.h"

namespace hangscope::identity {
namespace {

TEST(Titles, VllmWorkersCarryTheirParallelGrid) {
  const auto plain = parse_title("VLLM::Worker");
  ASSERT_TRUE(plain);
  EXPECT_EQ(model::to_string(plain->role), "rank");
  EXPECT_FALSE(plain->tp);
  const auto tp = parse_title("VLLM::Worker_TP3");
  ASSERT_TRUE(tp);
  EXPECT_EQ(tp->tp, 3);
  const auto full = parse_title("VLLM::Worker_DP0_PP1_TP3_EP2   ");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->dp, 0);
  EXPECT_EQ(full->pp, 1);
  EXPECT_EQ(full->tp, 3);
  EXPECT_EQ(full->ep, 2);
  EXPECT_EQ(parse_title("myprefix_VLLM::Worker_PP1_TP3")->pp, 1);
}

TEST(Titles, RolesThatAreNotRanks) {
  EXPECT_EQ(model::to_string(parse_title("VLLM::EngineCore_DP1")->role), "engine");
  EXPECT_EQ(parse_title("VLLM::EngineCore_DP1")->dp, 1);
  EXPECT_EQ(model::to_string(parse_title("VLLM::APIServer_0")->role), "api");
  EXPECT_EQ(model::to_string(parse_title("VLLM::DPCoordinator")->role), "coordinator");
  EXPECT_EQ(model::to_string(parse_title("ray::RayWorkerWrapper.execute_method")->role), "rank");
  EXPECT_EQ(parse_title("ray::vllm_Worker_3_TP1_PP0")->tp, 1);
  EXPECT_EQ(model::to_string(parse_title("ray::IDLE")->role), "driver");
  EXPECT_EQ(parse_title("sglang::scheduler_PP1_TP1")->pp, 1);
}

TEST(Titles, OtherTitlesAreNotRecognised) {
  EXPECT_FALSE(parse_title("python3"));
  EXPECT_FALSE(parse_title("VLLM::Worker_XX1"));
  EXPECT_FALSE(parse_title("VLLM::Worker_TPx"));
  EXPECT_FALSE(parse_title("VLLM::Something"));
  EXPECT_FALSE(parse_title(""));
}

TEST(Identity, TorchrunEnvironmentNamesTheRankAndJob) {
  const std::map<std::string, std::string> env = {{"RANK", "5"},
                                                  {"LOCAL_RANK", "1"},
                                                  {"WORLD_SIZE", "8"},
                                                  {"MASTER_ADDR", "10.0.0.1"},
                                                  {"MASTER_PORT", "29500"}};
  const auto id = identify(env, false, "python3");
  EXPECT_EQ(model::to_string(id.role), "rank");
  EXPECT_EQ(id.rank, 5);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.world_size, 8);
  EXPECT_EQ(id.source, model::IdentitySource::kEnv);
  EXPECT_EQ(id.job, "10.0.0.1:29500");
  const auto both = identify(env, true, "VLLM::Worker_TP1");
  EXPECT_EQ(both.source, model::IdentitySource::kMemoryEnv);
  EXPECT_EQ(both.tp, 1);
  EXPECT_EQ(both.sources.at("rank"), "memory-env");
  EXPECT_EQ(both.sources.at("world_size"), "memory-env");
  EXPECT_EQ(both.sources.at("tp"), "title");
}

TEST(Identity, TitleOnlyRanksAndUnidentifiedProcesses) {
  const auto titled = identify({}, false, "VLLM::Worker_PP1_TP3");
  EXPECT_EQ(model::to_string(titled.role), "rank");
  EXPECT_EQ(titled.source, model::IdentitySource::kTitle);
  EXPECT_FALSE(titled.rank);
  EXPECT_EQ(titled.tp, 3);
  const auto nothing = identify({{"HOME", "/root"}}, false, "python3");
  EXPECT_EQ(model::to_string(nothing.role), "unidentified");
  EXPECT_EQ(nothing.source, model::IdentitySource::kNone);
  EXPECT_EQ(
      identify({{"VLLM_DP_MASTER_IP", "10.1.1.1"}, {"VLLM_DP_MASTER_PORT", "1234"}}, false, "").job,
      "vllm-dp:10.1.1.1:1234");
  EXPECT_EQ(identify({{"VLLM_DP_RANK", "2"}}, false, "VLLM::EngineCore_DP2").dp, 2);
}

TEST(Environment, ParsesBlocksAndIgnoresTitlePadding) {
  const std::string block("A=1\0B=x=y\0\0junk\0=nokey\0", 24);
  const auto vars = parse_environ_block(block);
  EXPECT_EQ(vars.size(), 2u);
  EXPECT_EQ(vars.at("A"), "1");
  EXPECT_EQ(vars.at("B"), "x=y");
  EXPECT_TRUE(parse_environ_block(std::string(64, ' ')).empty());  // setproctitle padding
}

}  // namespace
}  // namespace hangscope::identity

namespace hangscope::identity {
namespace {

TEST(Logs, KeepsTheLinesThatMatterAndMasksSecrets) {
  const std::string log =
      "INFO starting\n"
      "(Worker_TP1 pid=42) world_size=16 rank=4 local_rank=4 backend=gloo\n"
      "[AutoTuner]: Tuning trtllm::fused_moe::gemm1: 10%|#  | 1/10\r[AutoTuner]: Tuning "
      "trtllm::fused_moe::gemm1: 20%\n"
      "calling with Authorization: Bearer abc.def.ghi\n"
      "export HF_TOKEN=hf_abcdefghijkl and --api-key sk-12345\n" +
      std::string(30, 'x') + "\n" + "RuntimeError: Application timeout caused pair closure\n";
  const auto lines = interesting_lines(log, 2);
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0], "(Worker_TP1 pid=42) world_size=16 rank=4 local_rank=4 backend=gloo");
  EXPECT_EQ(lines[1], "[AutoTuner]: Tuning trtllm::fused_moe::gemm1: 10%|#  | 1/10");
  EXPECT_EQ(lines.back(), "RuntimeError: Application timeout caused pair closure");
  for (const auto& line : lines) {
    EXPECT_EQ(line.find("abc.def.ghi"), std::string::npos) << line;
    EXPECT_EQ(line.find("hf_abcdefghijkl"), std::string::npos) << line;
    EXPECT_EQ(line.find("sk-12345"), std::string::npos) << line;
  }
  EXPECT_EQ(mask_log_line("export HF_TOKEN=hf_abc and --api-key sk-1"),
            "export HF_TOKEN=<masked> and --api-key <masked>");
  EXPECT_EQ(mask_log_line("Authorization: Bearer xyz"), "Authorization: Bearer <masked>");
}

}  // namespace
}  // namespace hangscope::identity

namespace hangscope::identity {
namespace {

TEST(Identity, VllmWorkerLogLineNamesTheRankWhenTheEnvironmentDoesNot) {
  model::RankIdentity id = identify({}, false, "VLLM::Worker_TP4");
  identify_from_log({"(Worker_TP4 pid=77) INFO 11-29 world_size=16 rank=4 local_rank=4 "
                     "distributed_init_method=tcp://10.0.0.1:29500 backend=nccl"},
                    id);
  EXPECT_EQ(id.rank, 4);
  EXPECT_EQ(id.world_size, 16);
  EXPECT_EQ(id.local_rank, 4);
  EXPECT_EQ(id.source, model::IdentitySource::kLog);
  EXPECT_EQ(id.tp, 4);
  model::RankIdentity from_env = identify({{"RANK", "2"}}, false, "");
  identify_from_log({"world_size=16 rank=9 local_rank=1"}, from_env);
  EXPECT_EQ(from_env.rank, 2);  // the environment wins
  model::RankIdentity none;
  identify_from_log({"nothing here", "local_rank=3 only"}, none);
  EXPECT_FALSE(none.rank);
}

TEST(Identity, ParallelCoordinatesFromVllmsAssignmentLine) {
  // A Ray worker: rank from the environment, pp/tp only in vLLM's log line.
  model::RankIdentity id =
      identify({{"RANK", "3"}}, false, "ray::RayWorkerWrapper.execute_model_ray");
  identify_from_log({"(RayWorkerWrapper pid=812) INFO 11-29 21:03:12 [parallel_state.py:1165] "
                     "rank 3 in world size 4 is assigned as DP rank 0, PP rank 1, TP rank 1, "
                     "EP rank N/A"},
                    id);
  EXPECT_EQ(id.pp, 1);
  EXPECT_EQ(id.tp, 1);
  EXPECT_EQ(id.dp, 0);
  EXPECT_EQ(id.sources.at("pp"), "log");
  // Another rank's line (a shared log) says nothing about this one.
  model::RankIdentity other = identify({{"RANK", "2"}}, false, "");
  identify_from_log({"rank 3 in world size 4 is assigned as DP rank 0, PP rank 1, TP rank 1, "
                     "EP rank N/A"},
                    other);
  EXPECT_FALSE(other.pp);
}

// `python -m sglang.launch_server --log-level debug > server.log 2>&1`: the launcher, its
// detokenizer and its schedulers all write server.log, the schedulers' "world_size=4 rank=R"
// lines among them. The file does not say which process wrote a line: it identifies none of
// them (the detokenizer was "rank 1" from the last line). A rank's own log still does.
TEST(Identity, ALogSeveralProcessesWriteIdentifiesNone) {
  const std::vector<model::LogExcerpt> shared = {
      {"/srv/server.log",
       {"[2026-12-02 07:37:48 TP0] world_size=4 rank=0 local_rank=0 "
        "distributed_init_method=tcp://10.0.0.1:5000 backend=nccl",
        "[2026-12-02 07:37:49 TP1] world_size=4 rank=1 local_rank=1 "
        "distributed_init_method=tcp://10.0.0.1:5000 backend=nccl",
        "rank 1 in world size 4 is assigned as DP rank 0, PP rank 0, TP rank 1, EP rank N/A"}}};
  const std::vector<model::LogExcerpt> own = {
      {"/srv/rank2.log", {"world_size=4 rank=2 local_rank=0 distributed_init_method=env://"}}};
  model::RankIdentity launcher, detokenizer, scheduler, rank2;
  identify_from_own_logs(
      {{&shared, &launcher}, {&shared, &detokenizer}, {&shared, &scheduler}, {&own, &rank2}});
  for (const auto* id : {&launcher, &detokenizer, &scheduler}) {
    EXPECT_FALSE(id->rank);
    EXPECT_FALSE(id->tp);
    EXPECT_EQ(model::to_string(id->role), "unidentified");
  }
  EXPECT_EQ(rank2.rank, 2);
  EXPECT_EQ(rank2.world_size, 4);
  EXPECT_EQ(rank2.source, model::IdentitySource::kLog);
  // One process alone with the file: its lines are its own.
  model::RankIdentity alone;
  identify_from_own_logs({{&shared, &alone}});
  EXPECT_EQ(alone.rank, 1);
  // A rank known from elsewhere (its environment, its memory) still takes its coordinates from
  // the shared log's assignment line that names it, and not another rank's.
  model::RankIdentity worker1, worker3;
  worker1.rank = 1;
  worker3.rank = 3;
  identify_from_own_logs({{&shared, &worker1}, {&shared, &worker3}, {&shared, &launcher}});
  EXPECT_EQ(worker1.tp, 1);
  EXPECT_EQ(worker1.pp, 0);
  EXPECT_EQ(worker1.sources["tp"], "log");
  EXPECT_FALSE(worker3.tp);
  EXPECT_FALSE(launcher.tp);
}

}  // namespace
}  // namespace hangscope::identity

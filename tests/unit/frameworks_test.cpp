// The framework tables (waits/frameworks.h) and the readers that iterate over them: each
// framework's process titles, job and rank variables and process-group modules are its table's
// data, and the generic readers (identity, python) read them as the code they replaced did.
#include "hangscope/waits/frameworks.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "hangscope/identity/rank_identity.h"
#include "hangscope/python/process_groups.h"

namespace hangscope {
namespace {

TEST(FrameworkTables, EachFrameworkHasOneTableFoundByItsName) {
  std::set<std::string_view> names;
  for (const auto* table : waits::frameworks()) {
    EXPECT_TRUE(names.insert(table->name).second) << table->name;
    EXPECT_EQ(waits::framework_named(table->name), table);
  }
  for (const std::string_view name : {"torch", "vllm", "sglang", "megatron", "ray", "python"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  EXPECT_EQ(waits::framework_named("trl"), nullptr);
  EXPECT_EQ(waits::default_serving_framework().name, "vllm");
}

TEST(FrameworkTables, AVllmTitleIsVllmsRankEngineOrFront) {
  const auto worker = identity::parse_title("VLLM::Worker_DP1_PP0_TP3");
  ASSERT_TRUE(worker);
  EXPECT_EQ(worker->framework, "vllm");
  EXPECT_EQ(worker->role, model::ProcessRole::kRank);
  EXPECT_EQ(worker->dp, 1);
  EXPECT_EQ(worker->pp, 0);
  EXPECT_EQ(worker->tp, 3);
  const auto engine = identity::parse_title("prefix-VLLM::EngineCore_DP2 --more");
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->role, model::ProcessRole::kEngine);
  EXPECT_EQ(engine->dp, 2);
  EXPECT_EQ(identity::parse_title("VLLM::APIServer_0")->role, model::ProcessRole::kApi);
  // The marker decides: a vLLM title whose name no entry knows, or whose suffix does not read,
  // says nothing (no other framework is tried).
  EXPECT_FALSE(identity::parse_title("VLLM::Tokenizer"));
  EXPECT_FALSE(identity::parse_title("VLLM::EngineCore_DPx"));
}

TEST(FrameworkTables, ARayV2ActorTitleCarriesItsRanksAsFarAsTheyRead) {
  const auto actor = identity::parse_title("ray::vllm_Worker_7_TP2_PP1");
  ASSERT_TRUE(actor);
  EXPECT_EQ(actor->framework, "ray");
  EXPECT_EQ(actor->role, model::ProcessRole::kRank);
  EXPECT_EQ(actor->tp, 2);
  EXPECT_EQ(actor->pp, 1);
  const auto partial = identity::parse_title("ray::vllm_Worker_7_TP2_xx");
  ASSERT_TRUE(partial);
  EXPECT_EQ(partial->tp, 2);
  const auto driver = identity::parse_title("ray::JobSupervisor");
  ASSERT_TRUE(driver);
  EXPECT_EQ(driver->role, model::ProcessRole::kDriver);
  EXPECT_FALSE(driver->tp);
  EXPECT_FALSE(identity::parse_title("xray::Worker"));  // the marker starts the title
}

TEST(FrameworkTables, AnSglangSchedulerTitleIsARank) {
  const auto scheduler = identity::parse_title("sglang::scheduler_DP1_TP3");
  ASSERT_TRUE(scheduler);
  EXPECT_EQ(scheduler->framework, "sglang");
  EXPECT_EQ(scheduler->role, model::ProcessRole::kRank);
  EXPECT_EQ(scheduler->dp, 1);
  EXPECT_EQ(scheduler->tp, 3);
  EXPECT_TRUE(identity::parse_title("sglang::scheduler"));
  EXPECT_FALSE(identity::parse_title("sglang::schedulerX_TP1"));
  EXPECT_FALSE(identity::parse_title("sglang::detokenizer"));
}

TEST(FrameworkTables, EachFrameworksVariablesNameTheJobInTheTablesOrder) {
  using Env = std::map<std::string, std::string>;
  EXPECT_EQ(identity::job_key(Env{{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}}),
            "10.0.0.1:29500");
  EXPECT_EQ(identity::job_key(Env{{"VLLM_DP_MASTER_IP", "10.0.0.2"}}), "vllm-dp:10.0.0.2:");
  EXPECT_EQ(identity::job_key(Env{{"RAY_JOB_ID", "02000000"}}), "ray-job:02000000");
  // torch's address first; one half of it names no job; an empty value is unset.
  EXPECT_EQ(identity::job_key(Env{{"MASTER_ADDR", "a"},
                                  {"MASTER_PORT", "1"},
                                  {"VLLM_DP_MASTER_IP", "b"},
                                  {"RAY_JOB_ID", "c"}}),
            "a:1");
  EXPECT_EQ(identity::job_key(Env{{"MASTER_ADDR", "a"}, {"RAY_JOB_ID", "c"}}), "ray-job:c");
  EXPECT_EQ(identity::job_key(Env{{"VLLM_DP_MASTER_IP", ""}, {"RAY_JOB_ID", "c"}}), "ray-job:c");
  EXPECT_EQ(identity::job_key(Env{}), "");
}

TEST(FrameworkTables, RankAndCoordinateVariablesFillWhatTheTitleDidNot) {
  const auto ranked = identity::identify(
      {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"VLLM_DP_RANK", "1"}}, false, "python3");
  EXPECT_EQ(ranked.rank, 3);
  EXPECT_EQ(ranked.world_size, 4);
  EXPECT_EQ(ranked.dp, 1);
  EXPECT_EQ(ranked.sources.at("dp"), "env");
  // The title's coordinate stands; the variable does not override it.
  const auto titled = identity::identify({{"VLLM_DP_RANK", "5"}}, true, "VLLM::EngineCore_DP2");
  EXPECT_EQ(titled.dp, 2);
  EXPECT_EQ(titled.sources.at("dp"), "title");
  // LOCAL_RANK alone names the local rank of a process its title says is a rank (Ray v1).
  const auto ray = identity::identify({{"LOCAL_RANK", "1"}}, false, "ray::RayWorkerWrapper");
  EXPECT_EQ(ray.local_rank, 1);
  EXPECT_FALSE(ray.rank);
  EXPECT_FALSE(identity::identify({{"LOCAL_RANK", "1"}}, false, "python3").local_rank);
}

// A coordinate log line the identity reader could not use would be skipped at run time: each
// table's pattern compiles, with one group for the rank and one per dimension it names.
TEST(FrameworkTables, EachCoordinateLogLineCompilesWithAGroupPerDimension) {
  int lines = 0;
  for (const auto* framework : waits::frameworks()) {
    for (const auto& line : framework->coordinate_log_lines) {
      ++lines;
      const RE2 pattern(line.pattern);
      ASSERT_TRUE(pattern.ok()) << framework->name << ": " << pattern.error();
      EXPECT_EQ(pattern.NumberOfCapturingGroups(), static_cast<int>(line.dimensions.size()) + 1)
          << framework->name << ": " << line.pattern;
    }
  }
  EXPECT_GE(lines, 1);  // vLLM's initialize_model_parallel line
  // The vLLM line, read through the table, fills what the environment did not; a newer line of
  // another rank is passed over.
  model::RankIdentity id;
  id.rank = 2;
  id.tp = 0;  // from the environment: stands
  identity::identify_from_log(
      {"INFO 12-05 [parallel_state.py:1106] rank 2 in world size 4 is assigned as DP rank 1, PP "
       "rank 1, TP rank 1, EP rank N/A",
       "rank 3 in world size 4 is assigned as DP rank 9, PP rank 9, TP rank 9"},
      id);
  EXPECT_EQ(id.dp, 1);
  EXPECT_EQ(id.pp, 1);
  EXPECT_EQ(id.tp, 0);
  EXPECT_EQ(id.sources.at("dp"), "log");
}

TEST(FrameworkTables, TheGroupModulesReadAreTorchsThenEachTables) {
  const auto& modules = python::ProcessGroupReader::modules_read();
  const std::vector<std::string_view> expected = {
      "torch.distributed.distributed_c10d", "vllm.distributed.parallel_state",
      "sglang.srt.distributed.parallel_state", "megatron.core.parallel_state"};
  EXPECT_EQ(modules, expected);
  const auto& vllm = waits::framework_named("vllm")->group_modules.front();
  ASSERT_TRUE(vllm.coordinator);
  EXPECT_EQ(vllm.coordinator->rank_in_group, "rank_in_group");
  const auto tp = std::find_if(vllm.globals.begin(), vllm.globals.end(),
                               [](const waits::GroupGlobal& g) { return g.name == "_TP"; });
  ASSERT_NE(tp, vllm.globals.end());
  EXPECT_EQ(tp->dimension, "tp");
  const auto& megatron = waits::framework_named("megatron")->group_modules.front();
  EXPECT_FALSE(megatron.coordinator);  // its globals are torch groups themselves
}

TEST(FrameworkTables, TheServingFrontsSayTheChainsWordsAndTheEnginesLocals) {
  const auto& sglang = *waits::framework_named("sglang")->serving;
  EXPECT_EQ(sglang.command_word, "sglang");
  EXPECT_EQ(sglang.rank_noun, "scheduler");
  const auto& vllm = *waits::framework_named("vllm")->serving;
  EXPECT_TRUE(vllm.by_default);
  EXPECT_EQ(vllm.rank_noun, "worker");
  ASSERT_EQ(vllm.awaited_worker_locals.size(), 2U);
  EXPECT_EQ(vllm.awaited_worker_locals[0].function, "get_response");
  EXPECT_EQ(vllm.awaited_worker_locals[0].local, "w");
}

}  // namespace
}  // namespace hangscope

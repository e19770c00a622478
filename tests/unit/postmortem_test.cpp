// Post-mortem diagnosis from flight-recorder dump directories alone (diagnose --flight-records):
// each culprit kind from dumps written as torch writes them (tests/fixtures/flight_recorder/
// postmortem, tools/fixtures/make_flight_recorder_dumps.py), in pickle and JSON, named by the
// group's consensus (rank 0 like any other), and the command end to end.
#include "hangscope/analysis/postmortem.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "command.h"
#include "fixtures.h"
#include "hangscope/common/files.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/rules/rule.h"
#include "hangscope/sources/flight_records.h"

namespace hangscope::analysis {
namespace {

const std::string kFixtures = testing::fixture_path("flight_recorder/postmortem/");
constexpr std::int64_t kWritten = 1'790'000'100'000'000'000;

// The dumps of a fixture directory, all written at kWritten.
std::vector<sources::DumpFile> dump_files(const std::string& dir) {
  std::vector<sources::DumpFile> out;
  for (const auto& name : list_directory(dir).value_or(std::vector<std::string>{})) {
    const auto read = read_file(dir + "/" + name);
    out.push_back(
        {dir + "/" + name, read.text.value_or(""), kWritten, read.text ? "" : "cannot read"});
  }
  return out;
}

// The bundle and its analysis (which points into the bundle).
struct Diagnosed {
  model::Bundle bundle;
  Analysis analysis;
};

std::unique_ptr<Diagnosed> diagnose_files(const std::vector<sources::DumpFile>& files) {
  auto d = std::make_unique<Diagnosed>();
  d->bundle = sources::postmortem_bundle(files);
  d->analysis = diagnosis::diagnose(d->bundle);
  return d;
}

std::unique_ptr<Diagnosed> diagnose_case(const std::string& the_case, const std::string& format) {
  return diagnose_files(dump_files(kFixtures + the_case + "/" + format));
}

const Verdict* find(const Analysis& a, const std::string& id) {
  for (const auto& v : a.verdicts) {
    if (v.id == id) return &v;
  }
  return nullptr;
}

class PostMortem : public ::testing::TestWithParam<std::string> {};

TEST_P(PostMortem, RankBehindIsNamed) {
  const auto d = diagnose_case("behind", GetParam());
  ASSERT_EQ(d->analysis.verdicts.size(), 1u);
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "collective-behind");
  EXPECT_EQ(v.diverged_ranks.list(), std::vector<int>{1});
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{0, 2, 3}));
  EXPECT_NE(v.summary.find("process group 0 (default_pg)"), std::string::npos) << v.summary;
  EXPECT_EQ(v.membership, "flight-recorder");
  EXPECT_EQ(d->analysis.conclusion, v.summary);
}

TEST_P(PostMortem, CulpritAtRankZeroIsNamedAsRankZero) {
  const auto d = diagnose_case("rank0_behind", GetParam());
  ASSERT_EQ(d->analysis.verdicts.size(), 1u);
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "collective-behind");
  EXPECT_EQ(v.diverged_ranks.list(), std::vector<int>{0});
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(v.summary.rfind("Rank 0 is behind", 0), 0u) << v.summary;
}

TEST_P(PostMortem, MissingDumpIsNamedAsSuch) {
  const auto d = diagnose_case("missing", GetParam());
  ASSERT_EQ(d->analysis.verdicts.size(), 1u);
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "flight-record-missing");
  EXPECT_EQ(v.diverged_ranks.list(), std::vector<int>{2});
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{0, 1, 3}));
  ASSERT_EQ(d->analysis.jobs.size(), 1u);
  EXPECT_EQ(d->analysis.jobs[0].world_size, 4);
  EXPECT_EQ(d->analysis.jobs[0].missing.list(), std::vector<int>{2});  // in the rank table
}

TEST_P(PostMortem, TwoGroupsWithOneMismatchEachAreBothReported) {
  const auto d = diagnose_case("two_groups", GetParam());
  ASSERT_EQ(d->analysis.verdicts.size(), 2u);
  std::map<std::vector<int>, const Verdict*> by_culprit;
  for (const auto& v : d->analysis.verdicts) {
    EXPECT_EQ(v.id, "collective-mismatch");
    by_culprit[v.diverged_ranks.list()] = &v;
  }
  ASSERT_TRUE(by_culprit.count({1}));
  ASSERT_TRUE(by_culprit.count({5}));
  const auto& sizes = *by_culprit[{1}];
  EXPECT_NE(sizes.summary.find("process group 1 (tp_0) differs in sizes"), std::string::npos)
      << sizes.summary;
  EXPECT_EQ(sizes.waiting_ranks.list(), (std::vector<int>{0, 2}));
  const auto& dtypes = *by_culprit[{5}];
  EXPECT_NE(dtypes.summary.find("process group 2 (tp_1) differs in dtypes"), std::string::npos)
      << dtypes.summary;
  EXPECT_EQ(dtypes.waiting_ranks.list(), (std::vector<int>{3, 4}));
}

TEST_P(PostMortem, RankAheadIssuedWhatNobodyElseDid) {
  const auto d = diagnose_case("ahead", GetParam());
  ASSERT_EQ(d->analysis.verdicts.size(), 1u);
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "collective-ahead");
  EXPECT_EQ(v.diverged_ranks.list(), std::vector<int>{2});
  EXPECT_NE(v.summary.find("#7"), std::string::npos) << v.summary;
  EXPECT_EQ(find(d->analysis, "collective-behind"), nullptr);  // the others are not behind
}

TEST_P(PostMortem, AllStartedNoneCompletedIsTheTransportNotARank) {
  const auto d = diagnose_case("transport", GetParam());
  ASSERT_EQ(d->analysis.verdicts.size(), 1u);
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "collective-transport");
  EXPECT_TRUE(v.diverged_ranks.empty());
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{0, 1, 2, 3}));
}

TEST_P(PostMortem, HealthyDumpsGiveNoVerdict) {
  const auto d = diagnose_case("healthy", GetParam());
  EXPECT_TRUE(d->analysis.verdicts.empty());
  EXPECT_NE(d->analysis.conclusion.find("No hang in the flight-recorder dumps"), std::string::npos)
      << d->analysis.conclusion;
  // No stacks: no classes of ranks "waiting at the same place" are claimed.
  ASSERT_EQ(d->analysis.jobs.size(), 1u);
  EXPECT_TRUE(d->analysis.jobs[0].classes.empty());
  EXPECT_EQ(d->analysis.jobs[0].ranks.size(), 4u);
}

TEST_P(PostMortem, CorruptFileIsNamedAndTheOthersStillDiagnosed) {
  const auto d = diagnose_case("corrupt", GetParam());
  std::vector<const model::NodeStatus*> failed;
  for (const auto& n : d->bundle.nodes) {
    if (n.status != model::NodeState::kOk) failed.push_back(&n);
  }
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0]->name.find("nccl_trace_rank_7"), std::string::npos);
  EXPECT_FALSE(failed[0]->error.empty());
  ASSERT_FALSE(d->analysis.verdicts.empty());
  EXPECT_EQ(d->analysis.verdicts.front().id, "collective-behind");
  EXPECT_EQ(d->analysis.verdicts.front().diverged_ranks.list(), std::vector<int>{1});
}

TEST_P(PostMortem, PipelineStageThatNeverSentIsNamed) {
  // pp_0 = ranks 0, 2, 4, 6 (group ranks 0-3 in the entries' names): rank 2 never sent
  // microbatch 4 on; rank 4 waits in its recv, rank 6 in a recv from rank 4, rank 0 in a send
  // rank 2 never received. pp_1 is healthy.
  const auto d = diagnose_case("pp_no_send", GetParam());
  ASSERT_EQ(d->analysis.verdicts.size(), 1u) << d->analysis.conclusion;
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "p2p-unmatched");
  EXPECT_EQ(v.diverged_ranks.list(), std::vector<int>{2});
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{0, 4, 6}));
  EXPECT_EQ(v.summary.rfind("Rank 2 never sent what rank 4 waits to receive in process group 1 "
                            "(pp_0): rank 4 is in nccl:recv 2<-1 #7",
                            0),
            0u)
      << v.summary;
  // The waiting ranks wait for rank 2 in the rank table, as the stacks would say live.
  const auto& job = d->analysis.jobs.at(0);
  EXPECT_EQ(job.ranks.at(job.by_rank.at(6)).waits_for.list(), std::vector<int>{2});
}

TEST(PostMortemBundle, DumpsWithoutIsP2pTellSendsAndRecvsByTheirNames) {
  // Older dumps have no `is_p2p`: the names say it, and the sends and recvs neither count as
  // collectives of their group nor hide the culprit.
  auto files = dump_files(kFixtures + "pp_no_send/json");
  for (auto& f : files) {
    auto doc = nlohmann::json::parse(f.bytes);
    for (auto& e : doc["entries"]) e.erase("is_p2p");
    f.bytes = doc.dump();
  }
  const auto d = diagnose_files(files);
  ASSERT_EQ(d->analysis.verdicts.size(), 1u) << d->analysis.conclusion;
  EXPECT_EQ(d->analysis.verdicts[0].id, "p2p-unmatched");
  EXPECT_EQ(d->analysis.verdicts[0].diverged_ranks.list(), std::vector<int>{2});
  const auto& job = d->analysis.jobs.at(0);
  std::string lines;
  for (const auto& l : job.ranks.at(job.by_rank.at(4)).collectives) lines += l + "\n";
  EXPECT_NE(lines.find("process group 1 (pp_0): no collective; last point-to-point nccl:recv "
                       "2<-1 #7"),
            std::string::npos)
      << lines;
}

// A JSON dump of one rank of a two-rank pipeline group whose one entry is `op` in `state`.
sources::DumpFile p2p_dump(int rank, const std::string& op, const std::string& state) {
  const nlohmann::json entry = {{"record_id", 0},
                                {"pg_id", 1},
                                {"process_group", {"1", "pp_0"}},
                                {"collective_seq_id", 0},
                                {"p2p_seq_id", 1},
                                {"op_id", 1},
                                {"profiling_name", op},
                                {"time_created_ns", 1},
                                {"input_sizes", {{4, 4096}}},
                                {"input_dtypes", {"BFloat16"}},
                                {"output_sizes", {{4, 4096}}},
                                {"output_dtypes", {"BFloat16"}},
                                {"state", state},
                                {"retired", false},
                                {"timeout_ms", 600000},
                                {"is_p2p", true}};
  const nlohmann::json doc = {
      {"version", "2.4"},
      {"pg_config", {{"1", {{"name", "1"}, {"desc", "pp_0"}, {"ranks", "[0, 1]"}}}}},
      {"pg_status", nlohmann::json::object()},
      {"entries", {entry}}};
  return {"nccl_trace_rank_" + std::to_string(rank), doc.dump(), kWritten, ""};
}

TEST(PostMortemBundle, TwoRanksReceivingFromEachOtherAreOneCycle) {
  const auto d = diagnose_files(
      {p2p_dump(0, "nccl:recv 0<-1", "started"), p2p_dump(1, "nccl:recv 1<-0", "started")});
  ASSERT_EQ(d->analysis.verdicts.size(), 1u) << d->analysis.conclusion;
  const auto& v = d->analysis.verdicts[0];
  EXPECT_EQ(v.id, "p2p-unmatched");
  EXPECT_EQ(v.diverged_ranks.list(), (std::vector<int>{0, 1}));
  EXPECT_NE(v.summary.find("wait for each other"), std::string::npos) << v.summary;
}

TEST(PostMortemBundle, SendAndRecvThatMetAndNeverCompletedAreTheTransportNotARank) {
  const auto met = diagnose_files(
      {p2p_dump(0, "nccl:send 0->1", "started"), p2p_dump(1, "nccl:recv 1<-0", "started")});
  ASSERT_EQ(met->analysis.verdicts.size(), 1u) << met->analysis.conclusion;
  const auto& v = met->analysis.verdicts[0];
  EXPECT_EQ(v.id, "p2p-transport");
  EXPECT_TRUE(v.diverged_ranks.empty());
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{0, 1}));
  // Once completed, the same exchange is no hang at all.
  const auto done = diagnose_files(
      {p2p_dump(0, "nccl:send 0->1", "completed"), p2p_dump(1, "nccl:recv 1<-0", "completed")});
  EXPECT_TRUE(done->analysis.verdicts.empty()) << done->analysis.conclusion;
}

TEST_P(PostMortem, MatchedSendsAndRecvsGiveNoVerdict) {
  const auto d = diagnose_case("p2p_healthy", GetParam());
  EXPECT_TRUE(d->analysis.verdicts.empty()) << d->analysis.conclusion;
}

TEST_P(PostMortem, SendAndRecvOfDifferentSizesNameBothRanks) {
  const auto d = diagnose_case("p2p_size_mismatch", GetParam());
  ASSERT_EQ(d->analysis.verdicts.size(), 1u) << d->analysis.conclusion;
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "p2p-mismatch");
  EXPECT_EQ(v.diverged_ranks.list(), (std::vector<int>{0, 1}));
  EXPECT_NE(v.summary.find("[[4,4096]]"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("[[8,4096]]"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("differ in sizes"), std::string::npos) << v.summary;
}

INSTANTIATE_TEST_SUITE_P(Formats, PostMortem, ::testing::Values("pickle", "json"));

TEST(PostMortemBundle, StaleDumpIsNamedAndNotCorrelated) {
  auto files = dump_files(kFixtures + "healthy/json");
  ASSERT_EQ(files.size(), 4u);
  files[3].written_unix_ns = kWritten - 3600LL * 1'000'000'000;  // an hour before the others
  const auto d = diagnose_files(files);
  ASSERT_EQ(d->analysis.verdicts.size(), 1u);
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "flight-record-missing");
  EXPECT_EQ(v.diverged_ranks.list(), std::vector<int>{3});
  bool named = false;
  for (const auto& e : v.evidence) named = named || e.find("is stale") != std::string::npos;
  EXPECT_TRUE(named) << "no evidence names the stale dump";
}

TEST(PostMortemBundle, OfTwoDumpsOfOneRankTheNewestIsKeptAndTheOtherNamed) {
  auto files = dump_files(kFixtures + "healthy/json");
  auto older = dump_files(kFixtures + "behind/json");  // rank 1 is behind there
  older[1].written_unix_ns = kWritten - 1'000'000'000;
  files.push_back(older[1]);
  const auto d = diagnose_files(files);
  EXPECT_TRUE(d->analysis.verdicts.empty());  // the newest dump of rank 1 is the healthy one
  std::string notes;
  for (const auto& s : d->bundle.snapshots) {
    for (const auto& n : s.notes) notes += n + "\n";
  }
  EXPECT_NE(notes.find("rank 1 also has the older dump"), std::string::npos) << notes;
}

TEST(PostMortemBundle, RankComesFromTheDumpsOwnKeyBeforeTheFileName) {
  const std::string json =
      R"({"version": "2.4", "rank": 5, "pg_config": {"0": {"name": "0", "desc": "default_pg",
      "ranks": "[0, 5]"}}, "pg_status": {}, "entries": []})";
  const auto bundle =
      sources::postmortem_bundle({{"/dumps/nccl_trace_rank_2", json, kWritten, ""}});
  ASSERT_EQ(bundle.snapshots.size(), 1u);
  const auto& p = bundle.snapshots[0].processes.at(0);
  EXPECT_EQ(p.identity.rank, 5);
  EXPECT_EQ(p.identity.world_size, 6);
  EXPECT_EQ(model::to_string(p.identity.role), "rank");
}

TEST(PostMortemBundle, DumpWithoutRankIsAnErrorNamingTheFile) {
  const auto bundle =
      sources::postmortem_bundle({{"/dumps/trace.json", R"({"entries": []})", kWritten, ""},
                                  {"/dumps/\xff\xfe_rank_x", "garbage", kWritten, ""}});
  ASSERT_EQ(bundle.nodes.size(), 2u);
  EXPECT_EQ(bundle.nodes[0].status, model::NodeState::kError);
  EXPECT_NE(bundle.nodes[0].error.find("no rank"), std::string::npos) << bundle.nodes[0].error;
  EXPECT_EQ(bundle.nodes[1].status, model::NodeState::kError);
  EXPECT_FALSE(bundle.nodes[1].error.empty());
  EXPECT_NE(bundle.nodes[1].name.find("_rank_x"), std::string::npos);  // printable
  EXPECT_TRUE(bundle.snapshots.empty());
}

// A JSON dump of one rank (the keys of torch's dump_nccl_trace_json) holding one entry of the
// default group.
sources::DumpFile one_entry_dump(int rank, const std::string& op, const nlohmann::json& sizes) {
  const nlohmann::json entry = {{"record_id", 0},
                                {"pg_id", 0},
                                {"process_group", {"0", "default_pg"}},
                                {"collective_seq_id", 1},
                                {"p2p_seq_id", 0},
                                {"op_id", 1},
                                {"profiling_name", op},
                                {"time_created_ns", 1},
                                {"input_sizes", sizes},
                                {"input_dtypes", {"Float"}},
                                {"output_sizes", sizes},
                                {"output_dtypes", {"Float"}},
                                {"state", "completed"},
                                {"retired", true},
                                {"timeout_ms", 600000},
                                {"is_p2p", false}};
  const nlohmann::json doc = {
      {"version", "2.4"},
      {"pg_config", {{"0", {{"name", "0"}, {"desc", "default_pg"}, {"ranks", "[0, 1, 2]"}}}}},
      {"pg_status",
       {{"0",
         {{"last_enqueued_collective", 1},
          {"last_started_collective", 1},
          {"last_completed_collective", 1}}}}},
      {"entries", {entry}}};
  return {"nccl_trace_rank_" + std::to_string(rank), doc.dump(), kWritten, ""};
}

TEST(PostMortemBundle, UnevenAllToAllSizesAreNoMismatchButAllReduceSizesAre) {
  const auto uneven = diagnose_files({one_entry_dump(0, "nccl:all_to_all", {{4, 2}}),
                                      one_entry_dump(1, "nccl:all_to_all", {{4, 2}}),
                                      one_entry_dump(2, "nccl:all_to_all", {{6, 2}})});
  EXPECT_TRUE(uneven->analysis.verdicts.empty()) << uneven->analysis.conclusion;
  const auto wrong = diagnose_files({one_entry_dump(0, "nccl:all_reduce", {{4, 2}}),
                                     one_entry_dump(1, "nccl:all_reduce", {{4, 2}}),
                                     one_entry_dump(2, "nccl:all_reduce", {{6, 2}})});
  ASSERT_EQ(wrong->analysis.verdicts.size(), 1u);
  EXPECT_EQ(wrong->analysis.verdicts[0].id, "collective-mismatch");
  EXPECT_EQ(wrong->analysis.verdicts[0].diverged_ranks.list(), std::vector<int>{2});
}

TEST(PostMortemBundle, RankFromFileName) {
  using model::rank_from_file_name;
  EXPECT_EQ(model::rank_from_file_name("/tmp/nccl_trace_rank_12"), 12);
  EXPECT_EQ(model::rank_from_file_name("host-a.rank3.json"), 3);
  EXPECT_EQ(model::rank_from_file_name("/x/node-1.nccl_trace_rank_0"), 0);
  EXPECT_EQ(model::rank_from_file_name("trace.json"), std::nullopt);
  EXPECT_EQ(model::rank_from_file_name("rank_99999999999"), std::nullopt);  // beyond int
  EXPECT_EQ(model::rank_from_file_name("/dir7/"), std::nullopt);
}

TEST(PostMortemBundle, LogLinesGoToTheirRanks) {
  auto bundle = sources::postmortem_bundle(dump_files(kFixtures + "behind/json"));
  const std::string shared =
      "[rank1]: WARNING ranks 1 warned here\n[rank2]: ERROR rank 2 failed\nno prefix\n";
  const auto notes = sources::attach_logs(
      bundle, {{"/logs/job.log", shared, 0, ""},
               {"/logs/worker_3.log", "RuntimeError: rank 3's own log\n", 0, ""},
               {"/logs/other.log", "nothing of a rank\n", 0, ""}});
  std::map<int, std::string> lines;
  for (const auto& node : bundle.snapshots) {
    for (const auto& p : node.processes) {
      for (const auto& log : p.logs) {
        for (const auto& line : log.lines) lines[*p.identity.rank] += line + "\n";
      }
    }
  }
  EXPECT_NE(lines[1].find("ranks 1 warned here"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("rank 2 failed"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("rank 2 failed"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("rank 3's own log"), std::string::npos) << lines[3];
  EXPECT_TRUE(lines[0].empty()) << lines[0];
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("other.log"), std::string::npos) << notes[0];
}

// The built-in signature rules from the dead job's logs (--log): logs written as vLLM, Ray and
// torchrun write them, the fingerprint lines taken from the user reports the rules come from
// (tests/fixtures/postmortem_logs).
const std::string kLogs = testing::fixture_path("postmortem_logs/");

std::unique_ptr<Diagnosed> diagnose_with_logs(const std::string& dumps, const std::string& logs) {
  auto d = std::make_unique<Diagnosed>();
  d->bundle = sources::postmortem_bundle(dump_files(kFixtures + dumps + "/json"));
  const auto notes = sources::attach_logs(d->bundle, dump_files(kLogs + logs));
  EXPECT_TRUE(notes.empty()) << notes.front();
  d->analysis = diagnosis::diagnose(d->bundle, rules::load_rules("", ""));
  return d;
}

TEST(PostMortemRules, AutotuneCacheHitOnRankZeroFromTheCombinedVllmLog) {
  const auto d = diagnose_with_logs("rank0_behind", "autotune");
  ASSERT_FALSE(d->analysis.verdicts.empty());
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "autotune-cache-mismatch") << d->analysis.conclusion;
  EXPECT_EQ(v.diverged_ranks.list(), std::vector<int>{0});
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{1, 2, 3}));
  std::string evidence;
  for (const auto& e : v.evidence) evidence += e + "\n";
  EXPECT_NE(evidence.find("Config cache hit for trtllm::fused_moe::gemm1"), std::string::npos)
      << evidence;
  // The dumps' own verdict (rank 0 behind in the default group) is kept, explained by the rule.
  const auto* behind = find(d->analysis, "collective-behind");
  ASSERT_NE(behind, nullptr);
  EXPECT_EQ(behind->diverged_ranks.list(), std::vector<int>{0});
  EXPECT_EQ(behind->explained_by, "autotune-cache-mismatch");
}

TEST(PostMortemRules, EveryRankHittingTheCacheFiresNothing) {
  const auto d = diagnose_with_logs("healthy", "autotune_all_hit");
  EXPECT_TRUE(d->analysis.verdicts.empty()) << d->analysis.conclusion;
}

TEST(PostMortemRules, SymmetricMemoryRanksThatMovedOnFromTheRayDriversLog) {
  const auto d = diagnose_with_logs("healthy", "symmetric_memory");
  ASSERT_FALSE(d->analysis.verdicts.empty());
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "symmetric-memory-rendezvous") << d->analysis.conclusion;
  EXPECT_EQ(v.diverged_ranks.list(), (std::vector<int>{2, 3}));
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{0, 1}));
  // Post-mortem a rank's "node" is its dump file: the node count is unknown, not true.
  std::string evidence;
  for (const auto& e : v.evidence) evidence += e + "\n";
  EXPECT_NE(evidence.find("fact unknown (not read as false): the group spans two or more nodes"),
            std::string::npos)
      << evidence;
  EXPECT_LT(v.confidence, 0.95);
}

TEST(PostMortemRules, FullDevShmSourceRankFromTorchrunPrefixes) {
  const auto d = diagnose_with_logs("healthy", "shm_full");
  ASSERT_FALSE(d->analysis.verdicts.empty());
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "shm-broadcast-skip") << d->analysis.conclusion;
  EXPECT_EQ(v.diverged_ranks.list(), std::vector<int>{0});
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{1, 2, 3}));
}

TEST(PostMortemRules, ColdCompileRankFromOneLogPerWorker) {
  const auto d = diagnose_with_logs("healthy", "warmup");
  ASSERT_FALSE(d->analysis.verdicts.empty());
  const auto& v = d->analysis.verdicts.front();
  EXPECT_EQ(v.id, "asymmetric-warmup") << d->analysis.conclusion;
  EXPECT_EQ(v.diverged_ranks.list(), std::vector<int>{2});
  EXPECT_EQ(v.waiting_ranks.list(), (std::vector<int>{0, 1, 3}));
  EXPECT_NE(v.summary.find("rank_2_0"), std::string::npos) << v.summary;  // its log line
}

TEST(PostMortemRules, OnlyOneRuleFiresOnEachSeedsLogs) {
  for (const std::string logs : {"autotune", "symmetric_memory", "shm_full", "warmup"}) {
    const auto d = diagnose_with_logs("healthy", logs);
    std::vector<std::string> fired;
    for (const auto& v : d->analysis.verdicts) {
      if (v.kind == VerdictKind::kSignature) fired.push_back(v.id);
    }
    EXPECT_EQ(fired.size(), 1u) << logs << ": " << ::testing::PrintToString(fired);
  }
}

TEST(PostMortemRules, TheLogAloneNeverPlacesARankThatIsNotPostMortem) {
  // The same ranks and logs, but known as live ranks (whose stack, here none, is the authority):
  // the post-mortem log conditions do not apply.
  auto bundle = sources::postmortem_bundle(dump_files(kFixtures + "healthy/json"));
  sources::attach_logs(bundle, dump_files(kLogs + "autotune"));
  for (auto& node : bundle.snapshots) {
    for (auto& p : node.processes) p.identity.source = model::IdentitySource::kEnv;
  }
  const auto a = diagnosis::diagnose(bundle, rules::load_rules("", ""));
  for (const auto& v : a.verdicts) EXPECT_NE(v.kind, VerdictKind::kSignature) << v.id;
}

TEST(PostMortemRules, VllmPrefixesGiveLinesToTheirRanks) {
  auto bundle = sources::postmortem_bundle(dump_files(kFixtures + "healthy/json"));
  const std::string log =
      "(RayWorkerWrapper pid=7, ip=10.0.0.2) DEBUG 11-03 20:08:20 [parallel_state.py:1004] "
      "world_size=4 rank=3 local_rank=1 distributed_init_method=tcp://10.0.0.1:29500 "
      "backend=nccl\n"
      "(RayWorkerWrapper pid=7, ip=10.0.0.2) WARNING seven's warning\n"
      "(Worker_TP1 pid=9) WARNING one's warning\n"
      "(Worker_PP1_TP0 pid=11) WARNING no rank without the sizes\n";
  const auto notes = sources::attach_logs(bundle, {{"/logs/driver.log", log, 0, ""}});
  EXPECT_TRUE(notes.empty());
  std::map<int, std::string> lines;
  for (const auto& node : bundle.snapshots) {
    for (const auto& p : node.processes) {
      for (const auto& l : p.logs) {
        for (const auto& line : l.lines) lines[*p.identity.rank] += line + "\n";
      }
    }
  }
  EXPECT_NE(lines[3].find("seven's warning"), std::string::npos) << lines[3];
  EXPECT_NE(lines[1].find("one's warning"), std::string::npos) << lines[1];
  for (const auto& [rank, text] : lines) {
    EXPECT_EQ(text.find("no rank without the sizes"), std::string::npos) << rank;
  }
}

// The command end to end: exit codes and report.json's top verdict.
std::string out_dir(const std::string& name) {
  return ::testing::TempDir() + "hangscope-postmortem-" + std::to_string(::getpid()) + "-" + name;
}

nlohmann::json report_of(const std::string& dir) {
  return nlohmann::json::parse(read_input_file(dir + "/report.json", "report"));
}

testing::CommandResult diagnose_cli(const std::string& the_case, const std::string& out,
                                    const std::string& extra = "") {
  return testing::run_command(std::string(HANGSCOPE_BINARY) + " diagnose --quiet --force " +
                              "--flight-records " + kFixtures + the_case + "/pickle -o " + out +
                              extra);
}

TEST(PostMortemCli, CulpritAtRankZeroExits3WithItsVerdictOnTop) {
  const auto out = out_dir("rank0");
  const auto r = diagnose_cli("rank0_behind", out);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const auto report = report_of(out);
  ASSERT_FALSE(report["verdicts"].empty());
  EXPECT_EQ(report["verdicts"][0]["id"], "collective-behind");
  EXPECT_EQ(report["verdicts"][0]["diverged_ranks"], nlohmann::json::array({0}));
  for (const auto& rank : report["ranks"]) {
    EXPECT_TRUE(rank["wait_point"].is_null()) << rank.dump();  // no stacks, none claimed
  }
  const auto md = read_input_file(out + "/report.md", "report.md");
  EXPECT_EQ(md.rfind("# hangscope: Rank 0 is behind", 0), 0u)
      << md.substr(0, 200);  // verdict first
  EXPECT_NE(md.find("None: no rank's stack is in this bundle."), std::string::npos);
  // The bundle replays: `report` re-runs the same analysis from its snapshots.
  const auto again = testing::run_command(std::string(HANGSCOPE_BINARY) + " report --json " + out);
  EXPECT_EQ(again.exit_code, 3) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["verdicts"][0]["id"], "collective-behind");
}

TEST(PostMortemCli, HealthyDumpsExit0) {
  const auto out = out_dir("healthy");
  const auto r = diagnose_cli("healthy", out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(report_of(out)["verdicts"].empty());
}

TEST(PostMortemCli, CorruptFileIsNamedOnStderrAndTheVerdictStillReached) {
  const auto out = out_dir("corrupt");
  const auto r = diagnose_cli("corrupt", out);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("nccl_trace_rank_7"), std::string::npos) << r.err;
  EXPECT_EQ(report_of(out)["verdicts"][0]["id"], "collective-behind");
}

TEST(PostMortemCli, NothingReadableExits1) {
  const auto r = testing::run_command(std::string(HANGSCOPE_BINARY) +
                                      " diagnose --quiet --force --flight-records " + kFixtures +
                                      "no-such-dir -o " + out_dir("none"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("no-such-dir"), std::string::npos) << r.err;
}

TEST(PostMortemCli, OptionsThatDoNotApplyAreUsageErrors) {
  for (const std::string extra : {" --samples 2", " --agents localhost", " --pid 1",
                                  " --token-file /dev/null", " --no-locals"}) {
    const auto r = diagnose_cli("healthy", out_dir("usage"), extra);
    EXPECT_EQ(r.exit_code, 2) << extra << ": " << r.err;
  }
  const auto log_alone =
      testing::run_command(std::string(HANGSCOPE_BINARY) +
                           " diagnose --log '/tmp/*.log' x.json -o " + out_dir("log-alone"));
  EXPECT_EQ(log_alone.exit_code, 2) << log_alone.err;
}

TEST(PostMortemCli, LogsOfTheDeadJobAreTaken) {
  const auto out = out_dir("logs");
  const auto r = diagnose_cli("behind", out, " --log " + kFixtures + "../special/no_entries.json");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(report_of(out)["verdicts"][0]["id"], "collective-behind");
}

TEST(PostMortemCli, SignatureRuleFromTheLogsTops) {
  const auto out = out_dir("rule-logs");
  const auto r = testing::run_command(
      std::string(HANGSCOPE_BINARY) + " diagnose --quiet --force --flight-records " + kFixtures +
      "rank0_behind/pickle --log '" + kLogs + "autotune/*.log' -o " + out);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const auto report = report_of(out);
  ASSERT_FALSE(report["verdicts"].empty());
  EXPECT_EQ(report["verdicts"][0]["id"], "autotune-cache-mismatch");
  EXPECT_EQ(report["verdicts"][0]["diverged_ranks"], nlohmann::json::array({0}));
}

}  // namespace
}  // namespace hangscope::analysis

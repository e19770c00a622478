// The renderings of an analysis: report.md (verdict first, GitHub's size limit), report.json
// keys, the merged tree as text and DOT, folded stacks, the terminal summary, and bundles
// written and read back.
#include "hangscope/report/report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "analysis_builders.h"
#include "hangscope/common/error.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/sources/sources.h"
#include "target_process.h"

namespace hangscope::report {
namespace {

using namespace analysis::testing_builders;

model::Bundle store_wait_bundle(int world_size = 8, int diverged = 5) {
  JobBuilder job(world_size);
  for (int r = 0; r < world_size; ++r) {
    job.rank(r, r == diverged ? store_wait_stack(r) : barrier_stack());
  }
  return job.bundle();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(ReportMarkdown, TheFirstThreeLinesSayWhichRankWhereAndWhy) {
  const auto bundle = store_wait_bundle();
  const auto md = report_markdown(bundle, diagnosis::diagnose(bundle));
  const auto lines = lines_of(md);
  ASSERT_GE(lines.size(), 3u);
  const std::string head = lines[0] + lines[1] + lines[2];
  EXPECT_EQ(lines[0].rfind("# hangscope: Rank 5 ", 0), 0u) << lines[0];
  EXPECT_NE(head.find("store.wait in load_weights (repro/gloo_barrier_hang.py:37)"),
            std::string::npos)
      << head;
  EXPECT_NE(head.find("ranks 0-4,6,7 wait for it in barrier"), std::string::npos) << head;
  EXPECT_NE(head.find("`rank-diverged`"), std::string::npos) << head;
  EXPECT_NE(md.find("## Wait-for chain"), std::string::npos);
  EXPECT_NE(md.find("<details>"), std::string::npos);
}

TEST(ReportMarkdown, NoDivergenceIsSaidPlainly) {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) job.rank(r, all_reduce_stack()).probes(r, 24, 8);
  const auto bundle = job.bundle();
  const auto md = report_markdown(bundle, diagnosis::diagnose(bundle));
  EXPECT_EQ(md.rfind("# hangscope: no divergence found\n\nNo divergence in job", 0), 0u) << md;
}

TEST(ReportMarkdown, AHugeJobStillFitsInAGithubIssue) {
  const auto bundle = store_wait_bundle(4096, 4000);
  const auto a = diagnosis::diagnose(bundle);
  const auto md = report_markdown(bundle, a);
  EXPECT_LT(md.size(), 65000u);
  EXPECT_EQ(md.rfind("# hangscope: Rank 4000 ", 0), 0u);
  EXPECT_NE(md.find("more ranks: see the classes below"), std::string::npos);
  EXPECT_NE(md.find("class 2, waiting, rank 4000:"), std::string::npos);
  EXPECT_NE(md.find("[0-3999,4001-4095] barrier"), std::string::npos);
}

// VerdictKind is an enum in the analysis; report.json and report.md keep writing the names
// docs/report.md promises.
TEST(ReportJson, VerdictKindsAreWrittenAsTheirNames) {
  const auto bundle = store_wait_bundle();
  auto a = diagnosis::diagnose(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts[0].kind, analysis::VerdictKind::kGeneric);
  EXPECT_EQ(report_json(bundle, a)["verdicts"][0]["kind"], "generic");
  EXPECT_NE(report_markdown(bundle, a).find("(generic, confidence"), std::string::npos);
  a.verdicts[0].kind = analysis::VerdictKind::kSignature;
  EXPECT_EQ(report_json(bundle, a)["verdicts"][0]["kind"], "signature");
  EXPECT_NE(report_markdown(bundle, a).find("(signature, confidence"), std::string::npos);
  EXPECT_EQ(analysis::to_string(analysis::VerdictKind::kGeneric), "generic");
  EXPECT_EQ(analysis::to_string(analysis::VerdictKind::kSignature), "signature");
}

TEST(ReportJson, EachRankCarriesTheEvidenceOfItsProgress) {
  JobBuilder job(2);
  model::DistributedState state;
  state.groups = {pg("0", {0, 1}, std::nullopt, 40)};
  job.rank(0, all_reduce_stack()).probes(0, 24, 6).distributed(0, state).sequence_step(0, 25);
  job.rank(1, all_reduce_stack(), 'R', 30).probes(1, 24, 0);
  const auto bundle = job.bundle();
  const auto j = report_json(bundle, diagnosis::diagnose(bundle));
  const auto& decided = j["ranks"][0]["evidence"];
  EXPECT_EQ(decided["probes"], 48);
  EXPECT_EQ(decided["probes_outside"], 12);
  EXPECT_EQ(decided["sequence_group"], "0");
  EXPECT_EQ(decided["sequence_first"], 40);
  EXPECT_EQ(decided["sequence_last"], 90);
  EXPECT_TRUE(decided["undecided"].is_null());
  const auto& undecided = j["ranks"][1]["evidence"];
  EXPECT_EQ(undecided["probes_outside"], 0);
  EXPECT_TRUE(undecided["sequence_last"].is_null());
  EXPECT_NE(undecided["undecided"].get<std::string>().find("no sequence number"),
            std::string::npos);
  EXPECT_TRUE(j["ranks"][1]["progressing"].is_null());
}

TEST(ReportJson, HasTheDesignKeys) {
  const auto bundle = store_wait_bundle();
  const auto j = report_json(bundle, diagnosis::diagnose(bundle));
  EXPECT_EQ(j["schema"], "hangscope.report/v1");
  const auto& v = j["verdicts"].at(0);
  for (const char* key : {"id", "kind", "title", "confidence", "diverged_ranks", "waiting_ranks",
                          "summary", "evidence", "remedies", "references"}) {
    EXPECT_TRUE(v.contains(key)) << key;
  }
  EXPECT_EQ(v["kind"], "generic");
  ASSERT_EQ(j["ranks"].size(), 8u);
  const auto& r5 = j["ranks"][5];
  for (const char* key : {"rank", "node", "pid", "job", "tp", "pp", "dp", "identity_source",
                          "state", "progressing", "stuck_since", "wait_point", "class"}) {
    EXPECT_TRUE(r5.contains(key)) << key;
  }
  EXPECT_EQ(r5["wait_point"]["kind"], "store");
  EXPECT_EQ(r5["wait_point"]["function"], "load_weights");
  EXPECT_EQ(r5["wait_point"]["arguments"]["key"], "'weights/5/ready'");
  EXPECT_EQ(r5["progressing"], false);
  EXPECT_EQ(r5["stuck_since_source"], "samples");
  EXPECT_EQ(j["classes"].size(), 2u);
  EXPECT_EQ(j["classes"][0]["rank_set"], "0-4,6,7");
  EXPECT_EQ(j["nodes"].size(), 4u);
}

// A world of 2^31 - 1 ranks with four present (issue 21): every rendering gives the missing ranks
// as one range, and report.json stays small and valid.
TEST(ReportJson, MissingRanksOfAHugeWorldAreRangesInEveryRendering) {
  using nlohmann::json;
  constexpr int kWorld = std::numeric_limits<int>::max();
  JobBuilder job(kWorld);
  for (int r = 0; r < 4; ++r) job.rank(r, barrier_stack());
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  std::ostringstream out;
  write_report_json(out, bundle, a);
  EXPECT_LT(out.str().size(), 100000u);
  const auto j = json::parse(out.str());
  EXPECT_EQ(j, report_json(bundle, a));
  EXPECT_EQ(j["ranks"].size(), 4u);
  const auto& job0 = j["jobs"].at(0);
  EXPECT_EQ(job0["world_size"], kWorld);
  EXPECT_EQ(job0["ranks"], 4);
  EXPECT_EQ(job0["present"], 4);
  EXPECT_EQ(job0["missing_count"], 2147483643u);
  EXPECT_EQ(job0["missing_ranges"], json::parse("[[4, 2147483646]]"));
  EXPECT_EQ(job0["missing_state"], "missing");
  EXPECT_EQ(job0["missing_listed"], false);
  const auto& v = j["verdicts"].at(0);
  EXPECT_TRUE(v["diverged_ranks"].is_null());
  EXPECT_EQ(v["diverged_ranges"], json::parse("[[4, 2147483646]]"));
  EXPECT_EQ(v["waiting_ranks"], json::parse("[0, 1, 2, 3]"));
  EXPECT_EQ(v["waiting_ranges"], json::parse("[[0, 3]]"));
  EXPECT_TRUE(j["ranks"][0]["waits_for"].is_null());
  EXPECT_EQ(j["ranks"][0]["waits_for_ranges"], json::parse("[[4, 2147483646]]"));

  const auto md = report_markdown(bundle, a);
  EXPECT_EQ(md.rfind("# hangscope: Ranks 4-2147483646 are missing", 0), 0u) << md.substr(0, 300);
  EXPECT_NE(md.find("| 4-2147483646 | - | - | - | missing | ? | - | - | - |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("- ranks 0-3 → ranks 4-2147483646 (group assumed to be the whole job)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- ranks 4-2147483646 wait for no rank: missing"), std::string::npos) << md;
  const auto terminal = terminal_summary(a, false);
  EXPECT_NE(terminal.find("\n4-2147483646 -"), std::string::npos) << terminal;
}

// Few missing ranks keep their entries in report.json's `ranks`, in rank order, and their
// lists in the verdicts, beside the ranges.
TEST(ReportJson, AFewMissingRanksAreStillListedInRankOrder) {
  using nlohmann::json;
  JobBuilder job(6);
  for (int r : {0, 1, 4}) job.rank(r, barrier_stack());
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  const auto j = report_json(bundle, a);
  ASSERT_EQ(j["ranks"].size(), 6u);
  for (int r = 0; r < 6; ++r) EXPECT_EQ(j["ranks"][r]["rank"], r);
  EXPECT_EQ(j["ranks"][2]["state"], "missing");
  EXPECT_TRUE(j["ranks"][2]["node"].is_null());
  EXPECT_EQ(j["ranks"][4]["node"], "node2");
  EXPECT_EQ(j["ranks"][5]["state"], "missing");
  const auto& job0 = j["jobs"].at(0);
  EXPECT_EQ(job0["ranks"], 6);
  EXPECT_EQ(job0["present"], 3);
  EXPECT_EQ(job0["missing_ranges"], json::parse("[[2, 3], [5, 5]]"));
  EXPECT_EQ(job0["missing_listed"], true);
  const auto& v = j["verdicts"].at(0);
  EXPECT_EQ(v["id"], "rank-dead");
  EXPECT_EQ(v["diverged_ranks"], json::parse("[2, 3, 5]"));
  EXPECT_EQ(v["diverged_ranges"], json::parse("[[2, 3], [5, 5]]"));
  const auto md = report_markdown(bundle, a);
  EXPECT_NE(md.find("| 1 | node0 |"), std::string::npos);
  EXPECT_LT(md.find("| 1 | node0 |"), md.find("| 2,3 | - |"));
  EXPECT_LT(md.find("| 2,3 | - |"), md.find("| 4 | node2 |"));
  EXPECT_LT(md.find("| 4 | node2 |"), md.find("| 5 | - |"));
}

TEST(ReportTree, RankSetsPerBranchAndTheDivergedBranchMarked) {
  const auto bundle = store_wait_bundle();
  const auto a = diagnosis::diagnose(bundle);
  const auto text = tree_text(a.jobs[0], {5});
  EXPECT_NE(text.find("[0-7] <module> (repro/gloo_barrier_hang.py:120)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("[0-4,6,7] barrier (torch/distributed/distributed_c10d.py:3152)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[5] run_rank (repro/gloo_barrier_hang.py:62)  <== diverged"),
            std::string::npos)
      << text;
  const auto dot = tree_dot(a);
  EXPECT_NE(dot.find("ranks 0-4,6,7"), std::string::npos);
  EXPECT_NE(dot.find("penwidth=3"), std::string::npos);
}

TEST(ReportFolded, OneLinePerDistinctStackCountedOverSamples) {
  const auto bundle = store_wait_bundle();
  const auto folded = stacks_folded(diagnosis::diagnose(bundle));
  const auto lines = lines_of(folded);
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(lines[5],
            "job 127.0.0.1:29500;rank 5;<module> (repro/gloo_barrier_hang.py:120);"
            "run_rank (repro/gloo_barrier_hang.py:62);load_weights "
            "(repro/gloo_barrier_hang.py:37);c10d::TCPStore::wait;c10d::TCPStore::doWait;"
            "__GI___poll 3");
}

TEST(ReportTerminal, ColouredOnlyWhenAsked) {
  const auto bundle = store_wait_bundle();
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_EQ(terminal_summary(a, false).find('\033'), std::string::npos);
  EXPECT_NE(terminal_summary(a, true).find("\033[1;31m"), std::string::npos);
  EXPECT_NE(terminal_summary(a, false).find("rank-diverged"), std::string::npos);
}

// nodes.json keeps each node's state as its name (what older versions wrote too), and reads
// it back typed.
TEST(ReportBundle, NodeStatesReadBackFromTheirNames) {
  const auto dir = testing::temp_path("bundle-states");
  auto bundle = store_wait_bundle();
  bundle.nodes[1].status = model::NodeState::kBusy;
  bundle.nodes.push_back({"node7", "10.0.0.7:7447", model::NodeState::kUnreachable, "timeout", 0});
  bundle.nodes.push_back({"node8", "10.0.0.8:7447", model::NodeState::kRefused, "token", 0});
  write_bundle_data(dir, bundle);
  std::ifstream in(dir + "/nodes.json");
  const auto written = nlohmann::json::parse(in);
  ASSERT_EQ(written.size(), bundle.nodes.size());
  EXPECT_EQ(written[1]["status"], "busy");
  EXPECT_EQ(written[bundle.nodes.size() - 2]["status"], "unreachable");
  EXPECT_EQ(written[bundle.nodes.size() - 1]["status"], "refused");
  const auto back = sources::from_bundle_dir(dir, kDefaultMaxInputBytes);
  ASSERT_GE(back.nodes.size(), bundle.nodes.size());
  for (std::size_t i = 0; i < bundle.nodes.size(); ++i) {
    EXPECT_EQ(back.nodes[i].status, bundle.nodes[i].status) << bundle.nodes[i].name;
  }
}

TEST(ReportBundle, WrittenAndReadBackToTheSameVerdict) {
  const auto dir = testing::temp_path("bundle");
  auto bundle = store_wait_bundle();
  bundle.nodes[1].clock_offset_ns = 1234567;
  write_bundle_data(dir, bundle);
  std::ofstream(dir + "/snapshots/zz-garbage.json") << "{ not a snapshot";
  const auto back = sources::from_bundle_dir(dir, kDefaultMaxInputBytes);
  EXPECT_EQ(back.snapshots.size(), bundle.snapshots.size());
  ASSERT_EQ(back.nodes.size(), 5u);
  EXPECT_EQ(back.nodes[1].clock_offset_ns, 1234567);
  EXPECT_EQ(back.nodes[4].status, model::NodeState::kError);
  EXPECT_NE(back.nodes[4].error.find("zz-garbage.json"), std::string::npos);
  const auto a = diagnosis::diagnose(back);
  ASSERT_EQ(a.verdicts.size(), 1u);  // the unreadable file is an input error, not a node down
  EXPECT_EQ(a.verdicts[0].diverged_ranks, std::vector<int>{5});
  EXPECT_THROW(sources::from_bundle_dir(dir + "/nope", kDefaultMaxInputBytes), hangscope::Error);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace hangscope::report

// The sources (sources/sources.h): each makes a bundle, a failed input is a node in error that
// names it, and the rest still come.
#include "hangscope/sources/sources.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "fixtures.h"
#include "hangscope/common/error.h"

namespace hangscope::sources {
namespace {

// Collects what a source says, as the CLI would print it.
class Collected final : public Feedback {
 public:
  void say(const std::string& line) const override { add(lines_, line); }
  void error(const std::string& message) const override { add(errors_, message); }
  void warning(const std::string& message) const override { add(warnings_, message); }
  ProgressMeter::Task start(std::string, std::string, std::uint64_t) const override { return {}; }
  ProgressMeter* meter() const override { return nullptr; }
  std::vector<std::string> errors() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_;
  }

 private:
  void add(std::vector<std::string>& to, const std::string& text) const {
    std::lock_guard<std::mutex> lock(mutex_);
    to.push_back(text);
  }
  mutable std::mutex mutex_;
  mutable std::vector<std::string> lines_, errors_, warnings_;
};

const model::NodeStatus* node_named(const model::Bundle& bundle, const std::string& name) {
  for (const auto& n : bundle.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

TEST(Sources, SnapshotFilesGiveTheirNodesAndABadFileIsANodeInError) {
  const auto good = testing::fixture_path("snapshots/schema-2.0-flight-record-as-json.pb");
  const auto missing = testing::fixture_path("snapshots/no-such-file.pb");
  Collected feedback;
  const auto bundle = from_snapshot_files({good, missing}, kDefaultMaxInputBytes, feedback);
  ASSERT_EQ(bundle.nodes.size(), 3u);  // node0, node1 of the file, then the missing file
  EXPECT_EQ(bundle.nodes[0].status, model::NodeState::kOk);
  EXPECT_EQ(bundle.nodes[1].status, model::NodeState::kOk);
  EXPECT_EQ(bundle.snapshots.size(), 6u);  // 2 nodes x 3 samples
  const auto* bad = node_named(bundle, missing);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->status, model::NodeState::kError);
  EXPECT_NE(bad->error.find("no-such-file.pb"), std::string::npos) << bad->error;
  ASSERT_EQ(feedback.errors().size(), 1u);
}

TEST(Sources, ABundleDirectoryReadsBackItsNodes) {
  const auto bundle = from_bundle_dir(testing::fixture_path("bundles/schema-2.0-behind"));
  ASSERT_EQ(bundle.nodes.size(), 2u);
  EXPECT_EQ(bundle.snapshots.size(), 6u);
  EXPECT_THROW(from_bundle_dir(testing::fixture_path("bundles/none")), Error);
}

TEST(Sources, FlightRecordsAreANodePerDumpAndTheRankOfEach) {
  Collected feedback;
  const auto dir = testing::fixture_path("flight_recorder/postmortem/behind/pickle");
  const auto bundle = from_flight_records({dir}, {}, kDefaultMaxInputBytes, feedback);
  ASSERT_EQ(bundle.nodes.size(), 4u);
  std::vector<int> ranks;
  for (const auto& s : bundle.snapshots) {
    ASSERT_EQ(s.processes.size(), 1u);
    EXPECT_EQ(s.processes[0].identity.source, model::IdentitySource::kFlightRecorder);
    ASSERT_TRUE(s.processes[0].identity.rank);
    ranks.push_back(*s.processes[0].identity.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(feedback.errors().empty());
}

TEST(Sources, APatternThatMatchesNothingIsOneFailedInput) {
  const auto found = files_of(testing::fixture_path("flight_recorder/nothing-*"));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].error.find("no file matches"), std::string::npos);
  Collected feedback;
  const auto bundle = from_flight_records({found[0].path}, {}, kDefaultMaxInputBytes, feedback);
  ASSERT_EQ(bundle.nodes.size(), 1u);
  EXPECT_EQ(bundle.nodes[0].status, model::NodeState::kError);
  EXPECT_EQ(feedback.errors().size(), 1u);
}

TEST(Sources, CoreFilesThatAreNoCoresAreNodesInError) {
  Collected feedback;
  CoreSource cores;
  cores.patterns = {testing::fixture_path("gpu/dgx-h100.query.csv")};
  const auto bundle = from_cores(cores, feedback);
  ASSERT_EQ(bundle.nodes.size(), 1u);
  EXPECT_EQ(bundle.nodes[0].status, model::NodeState::kError);
  EXPECT_TRUE(bundle.snapshots.empty());
  EXPECT_EQ(feedback.errors().size(), 1u);
}

}  // namespace
}  // namespace hangscope::sources

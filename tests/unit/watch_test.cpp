// watch's parts without a cluster: what one poll says of each rank (read_polls), when a job
// becomes suspect or a dead rank is told (JobTracker), and where incidents go (incidents.h).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis_builders.h"
#include "hangscope/common/error.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/watch/findings.h"
#include "hangscope/watch/incidents.h"
#include "hangscope/watch/job_progress.h"

namespace hangscope::watch {
namespace {

using analysis::testing_builders::all_reduce_stack;
using analysis::testing_builders::barrier_stack;
using analysis::testing_builders::JobBuilder;
using analysis::testing_builders::kUser;
using analysis::testing_builders::pg;
using analysis::testing_builders::py;

constexpr std::int64_t kSecond = 1'000'000'000;

const RankReading& rank_of(const JobPoll& poll, int rank) {
  for (const auto& r : poll.ranks) {
    if (r.rank == rank) return r;
  }
  throw std::runtime_error("no rank " + std::to_string(rank));
}

std::vector<model::Frame> working_stack() {
  return {py("compute_slow_path", kUser, 227), py("run_rank", kUser, 70),
          py("<module>", kUser, 120)};
}

TEST(WatchPolls, RanksStandingInABarrierWaitAndTheOneAtWorkWorks) {
  const auto bundle = JobBuilder(3)
                          .rank(0, barrier_stack())
                          .rank(1, working_stack(), 'R', 50)
                          .rank(2, barrier_stack())
                          .bundle();
  const auto polls = read_polls(bundle);
  ASSERT_EQ(polls.size(), 1u);
  EXPECT_EQ(polls[0].job, "127.0.0.1:29500");
  EXPECT_EQ(rank_of(polls[0], 0).state, "waiting");
  EXPECT_EQ(rank_of(polls[0], 2).state, "waiting");
  EXPECT_NE(rank_of(polls[0], 0).where.find("barrier"), std::string::npos);
  EXPECT_EQ(rank_of(polls[0], 1).state, "working");
  EXPECT_FALSE(polls[0].progressed);
  EXPECT_EQ(polls[0].waiting(), 2);
}

TEST(WatchPolls, ASequenceNumberThatAdvancedIsACollectiveCompleted) {
  model::DistributedState state;
  state.rank = 0;
  auto world = pg("0", {0, 1});
  world.sequence = 1804289385;
  state.groups.push_back(world);
  const auto bundle = JobBuilder(2)
                          .rank(0, all_reduce_stack())
                          .rank(1, all_reduce_stack())
                          .distributed(0, state)
                          .sequence_step(0, 40)
                          .bundle();
  const auto polls = read_polls(bundle);
  ASSERT_EQ(polls.size(), 1u);
  EXPECT_EQ(rank_of(polls[0], 0).state, "progressing");
  EXPECT_EQ(rank_of(polls[0], 0).sequence, 1804289385u + 80u);
  EXPECT_TRUE(polls[0].progressed);
}

TEST(WatchPolls, AProbeOutsideTheWaitIsAWaitLeft) {
  const auto bundle = JobBuilder(2)
                          .rank(0, all_reduce_stack())
                          .rank(1, all_reduce_stack())
                          .probes(1, 8, 3)
                          .bundle();
  const auto polls = read_polls(bundle);
  ASSERT_EQ(polls.size(), 1u);
  EXPECT_EQ(rank_of(polls[0], 1).state, "progressing");
  EXPECT_TRUE(polls[0].progressed);
}

// A poll of `job` at second `t` (lasting a second) whose ranks are in `states`.
JobPoll poll_at(int t, std::vector<std::string> states, const std::string& job = "j:1") {
  JobPoll p;
  p.job = job;
  p.label = "job " + job;
  p.unix_ns = t * kSecond;
  p.until_unix_ns = (t + 1) * kSecond;
  for (std::size_t r = 0; r < states.size(); ++r) {
    RankReading reading;
    reading.node = "node0";
    reading.pid = 100 + static_cast<pid_t>(r);
    reading.rank = static_cast<int>(r);
    reading.state = states[r];
    reading.still = states[r] == "waiting";
    p.ranks.push_back(reading);
  }
  p.progressed = std::any_of(states.begin(), states.end(),
                             [](const std::string& s) { return s == "progressing"; });
  return p;
}

TEST(WatchTracker, AStallBecomesSuspectAfterItsTimeAndOnlyOnceUntilTheJobProgresses) {
  JobTracker tracker(std::chrono::seconds(10));
  int t = 0;
  for (; t < 8; t += 2) {
    EXPECT_TRUE(tracker.update({poll_at(t, {"waiting", "working"})}).empty()) << t;
  }
  // The stall began at the first poll (0): its end at 9 is short of 10, at 11 it is not.
  auto events = tracker.update({poll_at(10, {"waiting", "working"})});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kSuspect);
  EXPECT_EQ(events[0].stalled_since_ns, 0);
  ASSERT_EQ(events[0].waiting.size(), 1u);
  EXPECT_EQ(events[0].waiting[0].rank, 0);
  tracker.incident("j:1");
  for (t = 12; t < 40; t += 2) {
    EXPECT_TRUE(tracker.update({poll_at(t, {"waiting", "working"})}).empty()) << t;
  }
  // It progresses: re-armed, and a new stall counts from its own first poll.
  EXPECT_TRUE(tracker.update({poll_at(40, {"progressing", "progressing"})}).empty());
  for (t = 42; t < 50; t += 2) {
    EXPECT_TRUE(tracker.update({poll_at(t, {"waiting", "working"})}).empty()) << t;
  }
  EXPECT_EQ(tracker.update({poll_at(52, {"waiting", "working"})}).size(), 1u);
}

TEST(WatchTracker, WithoutAfterHalfTheJobsCollectiveTimeoutDecidesWhenShorter) {
  JobTracker tracker(std::chrono::minutes(5), /*after_given=*/false);
  const auto with_timeout = [](int t) {
    auto p = poll_at(t, {"waiting", "working"});
    p.timeout_ms = 20'000;  // init_process_group(timeout=timedelta(seconds=20))
    return p;
  };
  for (int t = 0; t < 8; t += 2) EXPECT_TRUE(tracker.update({with_timeout(t)}).empty()) << t;
  EXPECT_EQ(tracker.update({with_timeout(10)}).size(), 1u);  // 10 s: half of 20 s
  // Given explicitly, --after stands.
  JobTracker given(std::chrono::minutes(5), /*after_given=*/true);
  for (int t = 0; t < 60; t += 2) EXPECT_TRUE(given.update({with_timeout(t)}).empty()) << t;
}

TEST(WatchTracker, ASuspicionTheSamplesClearedWaitsTwiceAsLong) {
  JobTracker tracker(std::chrono::seconds(10));
  for (int t = 0; t < 10; t += 2) tracker.update({poll_at(t, {"waiting", "waiting"})});
  ASSERT_EQ(tracker.update({poll_at(10, {"waiting", "waiting"})}).size(), 1u);
  tracker.cleared("j:1");
  for (int t = 12; t < 20; t += 2) {
    EXPECT_TRUE(tracker.update({poll_at(t, {"waiting", "waiting"})}).empty()) << t;
  }
  EXPECT_EQ(tracker.update({poll_at(20, {"waiting", "waiting"})}).size(), 1u);
}

TEST(WatchTracker, RanksThatWorkOrAJobThatMovesAreNeverSuspect) {
  JobTracker tracker(std::chrono::seconds(4));
  for (int t = 0; t < 60; t += 2) {
    // A job between steps (every rank at work), then steps that complete now and then.
    const auto states = t % 10 == 0 ? std::vector<std::string>{"progressing", "waiting"}
                                    : std::vector<std::string>{"working", "working"};
    EXPECT_TRUE(tracker.update({poll_at(t, states)}).empty()) << t;
  }
}

TEST(WatchTracker, ARankThatExitedWhilePeersStandStillIsToldOnePollLater) {
  JobTracker tracker(std::chrono::minutes(5));
  EXPECT_TRUE(tracker.update({poll_at(0, {"working", "working", "working"})}).empty());
  EXPECT_TRUE(tracker.update({poll_at(2, {"working", "exited", "working"})}).empty());
  const auto events = tracker.update({poll_at(4, {"waiting", "waiting"})});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, JobEvent::Kind::kRankDead);
  EXPECT_EQ(events[0].dead.rank, 1);
  EXPECT_EQ(events[0].waiting.size(), 2u);
  // Told once.
  EXPECT_TRUE(tracker.update({poll_at(6, {"waiting", "waiting"})}).empty());
}

TEST(WatchTracker, AJobThatEndsOrGoesOnWithoutTheRankTellsNothing) {
  JobTracker ending(std::chrono::minutes(5));
  ending.update({poll_at(0, {"working", "working"})});
  EXPECT_TRUE(ending.update({poll_at(2, {"exited", "working"})}).empty());
  EXPECT_TRUE(ending.update({poll_at(4, {"exited"})}).empty());  // the last one left too
  EXPECT_TRUE(ending.update({}).empty());
  JobTracker going_on(std::chrono::minutes(5));
  going_on.update({poll_at(0, {"working", "working", "working"})});
  going_on.update({poll_at(2, {"exited", "working", "working"})});
  for (int t = 4; t < 20; t += 2) {
    EXPECT_TRUE(going_on.update({poll_at(t, {"progressing", "working"})}).empty()) << t;
  }
}

class IncidentDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/hangscope-watch-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

Incident incident_of(const std::string& job, std::int64_t at) {
  Incident i;
  i.finding.job = job;
  i.label = "job " + job;
  i.detected_unix_ns = at;
  i.verdict = "rank-diverged";
  i.summary = "Rank 1 (node0 pid 101) works in compute_slow_path\nwhile the others wait";
  return i;
}

TEST_F(IncidentDir, AnIncidentIsACompleteBundleUnderItsTimeAndJobAndNeverHalfWritten) {
  const auto bundle = JobBuilder(3)
                          .rank(0, barrier_stack())
                          .rank(1, working_stack(), 'R', 50)
                          .rank(2, barrier_stack())
                          .bundle();
  const auto analysis = diagnosis::diagnose(bundle);
  std::deque<JobPoll> history = {poll_at(0, {"waiting", "working", "waiting"})};
  const std::int64_t at = 1'796'000'000LL * kSecond;  // 2026-11-30T00:53:20Z
  const auto path =
      write_incident(dir_, incident_of("10.0.0.1:29500", at), bundle, analysis, history);
  EXPECT_EQ(path, dir_ + "/20261130T005320Z-10.0.0.1_29500");
  for (const char* file : {"report.json", "report.md", "nodes.json", "watch.json"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(path + "/" + file)) << file;
  }
  std::ifstream in(path + "/watch.json");
  const auto watch = nlohmann::json::parse(in);
  EXPECT_EQ(watch["kind"], "hang");
  EXPECT_EQ(watch["job"], "10.0.0.1:29500");  // the finding's job, at the top as always
  EXPECT_EQ(watch["finding"]["job"], "10.0.0.1:29500");
  EXPECT_EQ(watch["verdict"]["id"], "rank-diverged");
  ASSERT_EQ(watch["observations"].size(), 1u);
  EXPECT_EQ(watch["observations"][0]["ranks"][1]["state"], "working");
  // A second incident of the job in the same second is named apart; nothing partial remains.
  const auto second =
      write_incident(dir_, incident_of("10.0.0.1:29500", at), bundle, analysis, history);
  EXPECT_EQ(second, path + "-2");
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
  }
}

TEST_F(IncidentDir, OldIncidentsGoBeyondKeepAndNothingElseIsTouched) {
  const auto bundle = JobBuilder(2).rank(0, barrier_stack()).rank(1, working_stack()).bundle();
  const auto analysis = diagnosis::diagnose(bundle);
  std::vector<std::string> paths;
  for (int i = 0; i < 4; ++i) {
    paths.push_back(write_incident(dir_, incident_of("j", (1'796'000'000LL + i) * kSecond), bundle,
                                   analysis, {}));
  }
  // Someone's own directory named like an incident, with a file of theirs: left alone.
  const std::string foreign = dir_ + "/20200101T000000Z-mine";
  std::filesystem::create_directory(foreign);
  std::ofstream(foreign + "/watch.json") << "{}";
  std::ofstream(foreign + "/notes.txt") << "keep me";
  // What an interrupted watch left.
  std::filesystem::create_directories(dir_ + "/.20261130T005320Z-j.partial/snapshots");
  const auto said = tidy_incidents(dir_, 2);
  EXPECT_FALSE(std::filesystem::exists(paths[0]));
  EXPECT_FALSE(std::filesystem::exists(paths[1]));
  EXPECT_TRUE(std::filesystem::exists(paths[2]));
  EXPECT_TRUE(std::filesystem::exists(paths[3]));
  EXPECT_TRUE(std::filesystem::exists(foreign + "/notes.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/.20261130T005320Z-j.partial"));
  EXPECT_TRUE(std::any_of(said.begin(), said.end(), [](const std::string& s) {
    return s.find("notes.txt") != std::string::npos;
  }));
}

RankReading reading(const std::string& node, pid_t pid, int rank, const std::string& state) {
  RankReading r;
  r.node = node;
  r.pid = pid;
  r.rank = rank;
  r.state = state;
  return r;
}

// A rank that exited while its peers wait: the capture taken afterwards no longer holds it, so
// the verdict is watch's own. Kept in watch.json, it leads the analysis of the incident again
// when the incident is read back (`hangscope report INCIDENT`), word for word.
TEST_F(IncidentDir, ARankDeadFindingLeadsTheIncidentsAnalysisAgainWhenReadBack) {
  const std::string job = "127.0.0.1:29500";
  const auto bundle = JobBuilder(3, job).rank(0, barrier_stack()).rank(2, barrier_stack()).bundle();
  Finding finding;
  finding.kind = Finding::Kind::kRankDead;
  finding.job = job;
  finding.dead = reading("node0", 101, 1, "exited");
  finding.dead.exit = "killed by SIGKILL";
  finding.dead.where = "all_reduce (torch/distributed/distributed_c10d.py:1536)";
  finding.waiting = {reading("node0", 100, 0, "waiting"), reading("node0", 102, 2, "waiting")};
  finding.where_waiting = "barrier (torch/distributed/distributed_c10d.py:3145)";

  auto watched = diagnosis::diagnose(bundle);
  const auto* lead = apply_finding(watched, finding);
  ASSERT_NE(lead, nullptr);
  EXPECT_EQ(lead->id, "rank-dead");
  EXPECT_EQ(&watched.verdicts.front(), lead);
  EXPECT_EQ(lead->diverged_ranks.contains(1), true);
  EXPECT_NE(lead->summary.find("Rank 1 (node0 pid 101) exited (killed by SIGKILL) while rank 0 "
                               "(node0 pid 100), rank 2 (node0 pid 102) waited in barrier"),
            std::string::npos)
      << lead->summary;
  EXPECT_EQ(watched.conclusion, lead->summary);

  Incident incident = incident_of(job, 1'796'000'000LL * kSecond);
  incident.finding = finding;
  const auto path = write_incident(dir_, incident, bundle, watched, {});
  const auto read = read_finding(path);
  ASSERT_TRUE(read.has_value());
  auto again = diagnosis::diagnose(bundle);
  const auto* lead_again = apply_finding(again, *read);
  ASSERT_NE(lead_again, nullptr);
  EXPECT_EQ(lead_again->id, lead->id);
  EXPECT_EQ(lead_again->summary, lead->summary);
  EXPECT_EQ(lead_again->evidence, lead->evidence);
  ASSERT_EQ(again.verdicts.size(), watched.verdicts.size());
  for (std::size_t i = 0; i < again.verdicts.size(); ++i) {
    EXPECT_EQ(again.verdicts[i].id, watched.verdicts[i].id) << i;
  }
}

// A hang: the job's own verdicts lead, in their order, the other jobs' after them.
TEST(WatchFindings, AHangFindingPutsItsJobsVerdictsFirst) {
  auto bundle =
      JobBuilder(2, "10.0.0.1:1").rank(0, barrier_stack()).rank(1, working_stack()).bundle();
  const auto other =
      JobBuilder(2, "10.0.0.2:2").rank(0, barrier_stack()).rank(1, working_stack()).bundle();
  // The other job's ranks on other hosts, with other pids.
  for (auto s : other.snapshots) {
    s.node_name = s.hostname = "other-" + s.node_name;
    for (auto& p : s.processes) p.pid += 5000;
    bundle.snapshots.push_back(std::move(s));
  }
  for (auto n : other.nodes) {
    n.name = "other-" + n.name;
    bundle.nodes.push_back(std::move(n));
  }
  auto analysis = diagnosis::diagnose(bundle);
  for (const std::string job : {"10.0.0.1:1", "10.0.0.2:2"}) {
    Finding finding;
    finding.job = job;
    const auto* lead = apply_finding(analysis, finding);
    ASSERT_NE(lead, nullptr) << job;
    EXPECT_TRUE(about_job(analysis.verdicts.front(), job)) << job;
    EXPECT_EQ(&analysis.verdicts.front(), lead);
    EXPECT_EQ(analysis.conclusion, lead->summary);
  }
}

// watch.json read back: none (a plain bundle), one without a finding (an older watch), and one
// whose finding is damaged, named with the field.
TEST_F(IncidentDir, AWatchFileWithoutAFindingSaysNothingAndADamagedOneIsNamed) {
  EXPECT_FALSE(read_finding(dir_).has_value());
  std::ofstream(dir_ + "/watch.json") << R"({"schema": "hangscope.watch/v1", "kind": "hang"})";
  EXPECT_FALSE(read_finding(dir_).has_value());
  std::ofstream(dir_ + "/watch.json") << R"({"finding": {"kind": "rank-dead", "job": "j",
      "dead": {"node": "n", "pid": "not a pid"}, "waiting": []}})";
  try {
    read_finding(dir_);
    ADD_FAILURE() << "a damaged finding was read";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(dir_ + "/watch.json"), std::string::npos) << what;
    EXPECT_NE(what.find("\"pid\" is not a number"), std::string::npos) << what;
  }
  std::ofstream(dir_ + "/watch.json") << R"({"finding": {"kind": "exploded", "job": "j"}})";
  EXPECT_THROW(read_finding(dir_), Error);
  std::ofstream(dir_ + "/watch.json") << "{ not json";
  EXPECT_THROW(read_finding(dir_), Error);
}

TEST(WatchJobNames, EveryCharacterOutsideThePortableSetBecomesAnUnderscore) {
  EXPECT_EQ(sanitize_job("198.51.100.1:29500"), "198.51.100.1_29500");
  EXPECT_EQ(sanitize_job("../x/\x1b[2J"), ".._x___2J");
  EXPECT_EQ(sanitize_job(""), "unknown-job");
}

TEST_F(IncidentDir, OnHangGetsTheIncidentInItsEnvironmentEscaped) {
  auto incident = incident_of("10.0.0.1:29500", 0);
  incident.summary = "rank 1\x1b[2J stuck\n# forged";
  const std::string out = dir_ + "/env";
  const auto result = run_on_hang("env | grep ^HANGSCOPE_ | sort > " + out + "; echo done", "/b/x",
                                  incident, std::chrono::seconds(10));
  EXPECT_TRUE(result.ok) << result.ended;
  EXPECT_EQ(result.output, "done\n");
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("HANGSCOPE_BUNDLE=/b/x\n"), std::string::npos) << text;
  EXPECT_NE(text.find("HANGSCOPE_JOB=10.0.0.1:29500\n"), std::string::npos) << text;
  EXPECT_NE(text.find("HANGSCOPE_VERDICT=rank-diverged\n"), std::string::npos) << text;
  EXPECT_NE(text.find("HANGSCOPE_SUMMARY=rank 1\\x1b[2J stuck\\x0a# forged\n"), std::string::npos)
      << text;
}

TEST(WatchOnHang, AFailingOrSlowCommandIsToldAndKilled) {
  const auto incident = incident_of("j", 0);
  const auto failed = run_on_hang("echo no >&2; exit 7", "/b", incident, std::chrono::seconds(10));
  EXPECT_FALSE(failed.ok);
  EXPECT_EQ(failed.ended, "exit status 7");
  EXPECT_EQ(failed.output, "no\n");
  const auto began = std::chrono::steady_clock::now();
  const auto slow = run_on_hang("sleep 30", "/b", incident, std::chrono::milliseconds(500));
  EXPECT_FALSE(slow.ok);
  EXPECT_EQ(slow.ended.rfind("killed after", 0), 0u) << slow.ended;
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10));
}

}  // namespace
}  // namespace hangscope::watch

// Flight-recorder dumps: the strict reader of torch's C++ pickles, both dump formats (fixtures
// written opcode for opcode as torch's Pickler does, tools/fixtures/make_flight_recorder_dumps.py),
// finding and triggering dumps, and the correlation across ranks: the rank one collective
// behind is named although every rank's stack is the same all_reduce.
#include "hangscope/collectives/flight_recorder.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include "analysis_builders.h"
#include "fixtures.h"
#include "hangscope/analysis/analysis.h"
#include "hangscope/collectives/torch_pickle.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/report/report.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/snapshot/flight_json.h"
#include "target_process.h"

namespace hangscope::collectives {
namespace {

using namespace analysis::testing_builders;

// Dumps written by torch and by hand (tests/fixtures/flight_recorder).
std::string fixture_bytes(const std::string& name) {
  return testing::fixture_text("flight_recorder/" + name);
}

model::FlightRecord fixture_record(const std::string& the_case, const std::string& format,
                                   int rank) {
  auto r = parse_flight_record(
      fixture_bytes(the_case + "/" + format + "/nccl_trace_rank_" + std::to_string(rank)));
  r.rank = rank;
  return r;
}

TEST(TorchPickle, BothFormatsReadTheSameDump) {
  const auto pickled = fixture_record("behind", "pickle", 0);
  const auto json = fixture_record("behind", "json", 0);
  EXPECT_EQ(pickled.format, "pickle");
  EXPECT_EQ(json.format, "json");
  EXPECT_EQ(pickled.version, "2.4");
  EXPECT_EQ(snapshot::flight_record_to_json(pickled)["groups"],
            snapshot::flight_record_to_json(json)["groups"]);
  EXPECT_EQ(snapshot::flight_record_to_json(pickled)["entries"],
            snapshot::flight_record_to_json(json)["entries"]);
  const auto& g = pickled.groups.at("0");
  EXPECT_EQ(g.desc, "default_pg");
  EXPECT_EQ(g.ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g.last_enqueued, 6);
  EXPECT_EQ(g.last_completed, 5);
  ASSERT_EQ(pickled.entries.size(), 6u);
  EXPECT_EQ(pickled.entries.back().describe(), "nccl:all_reduce #6 [[3,4]] [\"Float\"] started");
  // Large values take LONG1 (time_created_ns), memoised strings BINGET: both read back.
  EXPECT_EQ(pickled.entries.front().time_created_ns, 1'790'000'000'000'000'000);
}

TEST(TorchPickle, TypeTaggedAggregatesAreRead) {
  const auto r = parse_flight_record(fixture_bytes("special/tagged.pkl"));
  EXPECT_EQ(r.entries.size(), 3u);
  EXPECT_EQ(r.groups.at("0").last_completed, 3);
}

TEST(TorchPickle, AnythingElseIsRefusedWithTheReason) {
  const auto error_of = [](const std::string& bytes) {
    try {
      parse_flight_record(bytes);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error_of(fixture_bytes("special/truncated.pkl")).find("truncated"), std::string::npos);
  const auto object = error_of(fixture_bytes("special/object.pkl"));
  EXPECT_NE(object.find("is not one torch writes for data"), std::string::npos) << object;
  EXPECT_NE(error_of(fixture_bytes("special/no_entries.json")).find("no `entries` list"),
            std::string::npos);
  EXPECT_NE(error_of("\x80\x03}.").find("protocol 3"), std::string::npos);
  EXPECT_NE(error_of("garbage").find("neither pickle nor JSON"), std::string::npos);
  // Flipped bytes anywhere in a real dump: an error or a value, never a crash.
  const std::string good = fixture_bytes("behind/pickle/nccl_trace_rank_0");
  std::mt19937 random(7);
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    bad[random() % bad.size()] = static_cast<char>(random() % 256);
    if (random() % 4 == 0) bad.resize(random() % bad.size());
    refused += error_of(bad) != "accepted";
  }
  EXPECT_GT(refused, 0);
}

TEST(FlightRecorder, TheRecordSurvivesASnapshotFile) {
  // What an agent sends and a bundle keeps: written, read back, the same record.
  model::NodeSnapshot node;
  node.node_name = "node0";
  model::ProcessRecord p;
  p.pid = 42;
  p.identity.role = "rank";
  p.identity.rank = 2;
  p.flight_record = fixture_record("behind", "pickle", 2);
  p.flight_record->path = "/tmp/nccl_trace_rank_2";
  node.processes.push_back(p);
  const auto file = testing::temp_path("fr-snapshot") + ".json";
  snapshot::write_file(file, {node});
  const auto back = snapshot::read_file(file);
  ::unlink(file.c_str());
  ASSERT_EQ(back.size(), 1u);
  ASSERT_TRUE(back[0].processes.at(0).flight_record);
  const auto& fr = *back[0].processes[0].flight_record;
  EXPECT_EQ(fr.error, "");
  EXPECT_EQ(fr.path, "/tmp/nccl_trace_rank_2");
  EXPECT_EQ(snapshot::flight_record_to_json(fr), snapshot::flight_record_to_json(*p.flight_record));
  EXPECT_EQ(fr.groups.at("0").last_enqueued, 5);
}

TEST(FlightRecorder, TheNewestDumpOfTheRanksPrefixesIsRead) {
  const auto root = testing::temp_path("fr-root");
  std::system(("mkdir -p " + root + "/dumps " + root + "/home/u/.cache/torch").c_str());
  std::ofstream(root + "/home/u/.cache/torch/comm_lib_trace_rank_2")
      << fixture_bytes("healthy/json/nccl_trace_rank_2");
  ::sleep(1);
  std::ofstream(root + "/dumps/fr_2") << fixture_bytes("behind/pickle/nccl_trace_rank_2");
  const std::map<std::string, std::string> env = {{"TORCH_FR_DUMP_TEMP_FILE", "/dumps/fr_"},
                                                  {"HOME", "/home/u"}};
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const auto r = read_flight_record(root, env, 2, ::getuid(), now, std::chrono::seconds(600));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->path, "/dumps/fr_2");
  EXPECT_EQ(r->format, "pickle");
  EXPECT_TRUE(r->fresh);
  EXPECT_EQ(r->groups.at("0").last_enqueued, 5);
  const auto later = now + 3'600'000'000'000;  // an hour later: stale
  EXPECT_FALSE(
      read_flight_record(root, env, 2, ::getuid(), later, std::chrono::seconds(600))->fresh);
  EXPECT_FALSE(read_flight_record(root, env, 7, ::getuid(), now, std::chrono::seconds(600)));
  std::ofstream(root + "/dumps/fr_3") << "{broken";
  EXPECT_NE(read_flight_record(root, env, 3, ::getuid(), now, std::chrono::seconds(600))
                ->error.find("/dumps/fr_3"),
            std::string::npos);
  std::system(("rm -rf " + root).c_str());
}

TEST(FlightRecorder, ADumpIsTriggeredThroughTheRanksFifo) {
  const auto root = testing::temp_path("fr-fifo");
  std::system(("mkdir -p " + root + "/run").c_str());
  const std::map<std::string, std::string> env = {
      {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "/run/fr_pipe_"},
      {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/run/fr_dump_"}};
  EXPECT_NE(
      trigger_flight_dump(root, {}, 0, ::getuid(), std::chrono::milliseconds(100)).find("not set"),
      std::string::npos);
  EXPECT_NE(
      trigger_flight_dump(root, env, 0, ::getuid(), std::chrono::milliseconds(100)).find("no fifo"),
      std::string::npos);
  ASSERT_EQ(::mkfifo((root + "/run/fr_pipe_0.pipe").c_str(), 0600), 0);
  // Nobody reads the fifo yet: refused at once, never blocking.
  EXPECT_NE(trigger_flight_dump(root, env, 0, ::getuid(), std::chrono::milliseconds(100))
                .find("nobody reads"),
            std::string::npos);
  // A rank's dump thread: reads the fifo, then writes its dump (as ProcessGroupNCCL does).
  std::thread rank([&] {
    std::ifstream pipe(root + "/run/fr_pipe_0.pipe");
    std::string request;
    std::getline(pipe, request);
    std::ofstream(root + "/run/fr_dump_0") << fixture_bytes("behind/pickle/nccl_trace_rank_0");
  });
  std::string result = "not tried";
  testing::eventually(
      [&] {
        result = trigger_flight_dump(root, env, 0, ::getuid(), std::chrono::milliseconds(3000));
        return result.find("nobody reads") == std::string::npos;
      },
      std::chrono::seconds(5));
  rank.join();
  EXPECT_EQ(result, "");
  std::system(("rm -rf " + root).c_str());
}

// A directory in /tmp removed with everything in it when the test ends, however it ends.
struct TempRoot {
  explicit TempRoot(const std::string& stem) : path(testing::temp_path(stem)) {
    std::system(("mkdir -p " + path + "/run " + path + "/dumps").c_str());
  }
  ~TempRoot() { std::system(("rm -rf " + path).c_str()); }
  std::string path;
};

// What a reader of a fifo got: the bytes waiting in it, "" when none (it never blocks).
std::string waiting_bytes(int fd) {
  char buffer[16];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
}

// Issue 30 item 7: the agent (root) writes "1\n" into the rank's TORCH_NCCL_DEBUG_INFO_PIPE_FILE
// fifo only when it is a FIFO of the rank's user or root. A FIFO of another user, a link swapped
// in (to a file or to a FIFO) and a regular file are refused by name, and nothing is written.
TEST(FlightRecorder, TheTriggerWritesOnlyIntoAFifoOfTheRanksUserOrRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give files to uid 65534";
  const TempRoot root("fr-owner");
  const std::map<std::string, std::string> env = {{"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "/run/p_"}};
  const std::string fifo = root.path + "/run/p_0.pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  ASSERT_EQ(::chown(fifo.c_str(), 65534, 65534), 0);
  // A reader is there: a write that was not refused would land.
  const FileDescriptor reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(reader);
  const auto refused = request_flight_dump(root.path, env, 0, 1000);
  EXPECT_NE(refused.find("fifo /run/p_0.pipe refused: it belongs to uid 65534, neither uid 1000"),
            std::string::npos)
      << refused;
  EXPECT_EQ(waiting_bytes(reader.get()), "");
  // The rank's own user's fifo is asked.
  EXPECT_EQ(request_flight_dump(root.path, env, 0, 65534), "");
  EXPECT_EQ(waiting_bytes(reader.get()), "1\n");

  // A link swapped in, to a root-owned FIFO with a reader and to a root-owned file.
  const std::string other_fifo = root.path + "/run/other.pipe";
  ASSERT_EQ(::mkfifo(other_fifo.c_str(), 0600), 0);
  const FileDescriptor other_reader(::open(other_fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(other_reader);
  const std::string victim = root.path + "/victim";
  std::ofstream(victim) << "precious";
  for (const auto& target : {other_fifo, victim}) {
    ASSERT_EQ(::unlink(fifo.c_str()), 0);
    ASSERT_EQ(::symlink(target.c_str(), fifo.c_str()), 0);
    const auto linked = request_flight_dump(root.path, env, 0, 65534);
    EXPECT_NE(linked.find("refused: it is a symbolic link"), std::string::npos) << linked;
  }
  EXPECT_EQ(waiting_bytes(other_reader.get()), "");
  EXPECT_EQ(*read_file(victim).text, "precious");
  // A regular file at the fifo's path.
  ASSERT_EQ(::unlink(fifo.c_str()), 0);
  std::ofstream(fifo) << "a file";
  const auto regular = request_flight_dump(root.path, env, 0, 0);
  EXPECT_NE(regular.find("refused: it is a regular file, not a FIFO"), std::string::npos)
      << regular;
  EXPECT_EQ(*read_file(fifo).text, "a file");
}

// Dumps are read from /tmp and the rank's environment: only a regular file of the rank's user or
// root is read. A dump of another user, a link and a FIFO are refused with the reason (a FIFO
// without waiting for a writer), and a good dump under another prefix is still read.
TEST(FlightRecorder, DumpsAreReadOnlyFromRegularFilesOfTheRanksUserOrRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give files to uid 65534";
  const TempRoot root("fr-dump-owner");
  const std::map<std::string, std::string> env = {{"TORCH_FR_DUMP_TEMP_FILE", "/dumps/fr_"}};
  const std::string dump = root.path + "/dumps/fr_2";
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const auto read = [&](uid_t uid) {
    return read_flight_record(root.path, env, 2, uid, now, std::chrono::seconds(600));
  };
  std::ofstream(dump) << fixture_bytes("behind/pickle/nccl_trace_rank_2");
  ASSERT_EQ(::chown(dump.c_str(), 65534, 65534), 0);
  auto r = read(1000);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->path, "/dumps/fr_2");
  EXPECT_NE(r->error.find("refused (belongs to uid 65534, neither uid 1000"), std::string::npos)
      << r->error;
  EXPECT_TRUE(r->entries.empty());
  r = read(65534);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error, "");
  EXPECT_EQ(r->groups.at("0").last_enqueued, 5);

  const std::string elsewhere = root.path + "/elsewhere";
  ASSERT_EQ(::rename(dump.c_str(), elsewhere.c_str()), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), dump.c_str()), 0);
  r = read(65534);
  ASSERT_TRUE(r);
  EXPECT_NE(r->error.find("refused (is a symbolic link"), std::string::npos) << r->error;

  ASSERT_EQ(::unlink(dump.c_str()), 0);
  ASSERT_EQ(::mkfifo(dump.c_str(), 0600), 0);
  const auto started = std::chrono::steady_clock::now();
  r = read(0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  ASSERT_TRUE(r);
  EXPECT_NE(r->error.find("refused (is a FIFO"), std::string::npos) << r->error;

  // /tmp/nccl_trace_rank_2 of the rank's root is the next prefix: a good dump there is read
  // despite the FIFO under the first prefix.
  std::system(("mkdir -p " + root.path + "/tmp").c_str());
  ASSERT_EQ(::rename(elsewhere.c_str(), (root.path + "/tmp/nccl_trace_rank_2").c_str()), 0);
  r = read(65534);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->path, "/tmp/nccl_trace_rank_2");
  EXPECT_EQ(r->error, "");
}

// Four ranks all in the same all_reduce (same stacks), with the case's dumps.
model::Bundle job_with_dumps(const std::string& the_case, const std::string& format) {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) {
    job.rank(r, all_reduce_stack());
    const auto path = testing::fixture_path("flight_recorder/" + the_case + "/" + format +
                                            "/nccl_trace_rank_" + std::to_string(r));
    if (::access(path.c_str(), R_OK) == 0) job.flight(r, fixture_record(the_case, format, r));
  }
  return job.bundle();
}

const analysis::Verdict* verdict(const analysis::Analysis& a, const std::string& id) {
  for (const auto& v : a.verdicts) {
    if (v.id == id) return &v;
  }
  return nullptr;
}

TEST(Correlation, TheRankOneCollectiveBehindIsNamed) {
  for (const std::string format : {"pickle", "json"}) {
    const auto bundle = job_with_dumps("behind", format);
    const auto a = diagnosis::diagnose(bundle);
    const auto* v = verdict(a, "collective-behind");
    ASSERT_NE(v, nullptr) << format;
    EXPECT_EQ(v->diverged_ranks, std::vector<int>{2});
    EXPECT_EQ(v->waiting_ranks, (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(a.verdicts.front().id, "collective-behind") << a.conclusion;
    EXPECT_NE(v->summary.find("wait in collective nccl:all_reduce #6"), std::string::npos)
        << v->summary;
    EXPECT_EQ(a.jobs[0].find(0)->waits_for, std::vector<int>{2});
    EXPECT_EQ(a.jobs[0].find(2)->collectives.at(0),
              "process group 0 (default_pg): issued #5, started #5, completed #5; last "
              "nccl:all_reduce #5 [[3,4]] [\"Float\"] completed");
  }
}

TEST(Correlation, TheReportShowsEachRanksCollectives) {
  const auto bundle = job_with_dumps("behind", "pickle");
  const auto a = diagnosis::diagnose(bundle);
  const auto md = report::report_markdown(bundle, a);
  EXPECT_NE(md.find("Collectives (flight recorder):"), std::string::npos);
  EXPECT_NE(md.find("- rank 2: process group 0 (default_pg): issued #5"), std::string::npos);
  EXPECT_EQ(md.find("# hangscope: Rank 2 is behind in process group 0"), 0u) << md.substr(0, 200);
  const auto json = report::report_json(bundle, a);
  const auto& rank2 = json["ranks"][2];
  EXPECT_EQ(rank2["rank"], 2);
  EXPECT_EQ(rank2["flight_recorder"]["format"], "pickle");
  EXPECT_NE(rank2["collectives"][0].get<std::string>().find("completed #5"), std::string::npos);
}

TEST(Correlation, TypeAndSizeMismatchesNameTheOddRank) {
  const auto type = job_with_dumps("type_mismatch", "pickle");
  const auto a = diagnosis::diagnose(type);
  const auto* v = verdict(a, "collective-mismatch");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->diverged_ranks, std::vector<int>{1});
  EXPECT_NE(v->summary.find("nccl:all_gather #6"), std::string::npos) << v->summary;
  const auto size = job_with_dumps("size_mismatch", "json");
  const auto b = diagnosis::diagnose(size);
  const auto* w = verdict(b, "collective-mismatch");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->diverged_ranks, std::vector<int>{3});
  EXPECT_NE(w->summary.find("[[4,4]]"), std::string::npos) << w->summary;
}

TEST(Correlation, HealthyDumpsAndAMissingRank) {
  const auto healthy = job_with_dumps("healthy", "pickle");
  const auto a = diagnosis::diagnose(healthy);
  EXPECT_EQ(verdict(a, "collective-behind"), nullptr);
  EXPECT_EQ(verdict(a, "collective-mismatch"), nullptr);
  EXPECT_EQ(a.jobs[0].find(1)->collectives.size(), 1u);
  // Rank 3 left no dump: nothing to be behind of, and no verdict invented for it.
  const auto missing = job_with_dumps("missing_rank", "pickle");
  const auto b = diagnosis::diagnose(missing);
  EXPECT_EQ(verdict(b, "collective-behind"), nullptr);
  EXPECT_TRUE(b.jobs[0].find(3)->collectives.empty());
}

TEST(Correlation, StaleDumpsAreNotTrusted) {
  JobBuilder job(4);
  for (int r = 0; r < 4; ++r) {
    auto record = fixture_record("behind", "pickle", r);
    record.fresh = r != 2;  // rank 2's dump is old: it says nothing about now
    job.rank(r, all_reduce_stack()).flight(r, record);
  }
  const auto bundle = job.bundle();
  const auto a = diagnosis::diagnose(bundle);
  EXPECT_EQ(verdict(a, "collective-behind"), nullptr);
  EXPECT_TRUE(a.jobs[0].find(2)->collectives.empty());
}

}  // namespace
}  // namespace hangscope::collectives

// A real torch.distributed gloo job hung in a barrier (Debian's python3-torch): the waiting
// rank's capture shows gloo's receive wait under gloo::barrier; the diverged rank's does not.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "hangscope/capture/core_capture.h"
#include "hangscope/capture/process_capture.h"
#include "hangscope/common/files.h"
#include "stack_assertions.h"
#include "target_process.h"

namespace hangscope {
namespace {

constexpr const char* kPython = "/usr/bin/python3";
const std::string kScript = HANGSCOPE_SOURCE_DIR "/tools/repro/gloo_barrier_hang.py";

pid_t pid_from_line(const std::string& line) {  // "rank <r> pid <pid> <what>"
  std::istringstream in(line);
  std::string word;
  int rank = 0;
  pid_t pid = 0;
  in >> word >> rank >> word >> pid;
  return pid;
}

const model::ThreadDump* thread_with(const model::ProcessDump& dump, const std::string& fn) {
  for (const auto& t : dump.threads) {
    if (testing::frame_index(t, fn) >= 0) return &t;
  }
  return nullptr;
}

TEST(GlooCapture, WaitingRankShowsGlooBarrierAndDivergedRankDoesNot) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing (tools/install-deps.sh)";
  testing::TargetProcess job(
      {kPython, kScript, "--world-size", "2", "--diverged-rank", "1", "--timeout", "600"});
  const pid_t waiting = pid_from_line(job.wait_for_line("rank 0 pid", std::chrono::seconds(120)));
  const pid_t diverged = pid_from_line(job.wait_for_line("rank 1 pid", std::chrono::seconds(120)));
  ASSERT_GT(waiting, 0);
  ASSERT_GT(diverged, 0);

  // The rank prints before it calls barrier(): capture until the barrier is reached.
  model::ProcessDump dump;
  const model::ThreadDump* worker = nullptr;
  ASSERT_TRUE(testing::eventually(
      [&] {
        dump = capture::capture_process(waiting, {});
        worker = thread_with(dump, "gloo::transport::tcp::UnboundBuffer::waitRecv");
        return worker != nullptr;
      },
      std::chrono::seconds(60)));
  EXPECT_TRUE(testing::has_frames_in_order(
      *worker, {"gloo::transport::tcp::UnboundBuffer::waitRecv", "gloo::barrier",
                "c10d::ProcessGroupGloo::runLoop", "start_thread"}));
  EXPECT_NE(worker->frames[static_cast<std::size_t>(testing::frame_index(*worker, "gloo::barrier"))]
                .module.find("libgloo"),
            std::string::npos);
  // The main (Python) thread waits for the work to finish.
  const auto* main_thread = &dump.threads.front();
  EXPECT_EQ(main_thread->tid, waiting);
  EXPECT_TRUE(testing::has_frames_in_order(*main_thread, {"c10d::Work::wait"}))
      << testing::describe_stack(*main_thread);
  EXPECT_TRUE(testing::no_thread_stopped(waiting));

  const auto diverged_dump = capture::capture_process(diverged, {});
  EXPECT_EQ(thread_with(diverged_dump, "gloo::barrier"), nullptr);
  EXPECT_TRUE(testing::no_thread_stopped(diverged));
}

// The number of the script line that is exactly `statement` (leading spaces ignored).
int script_line(const std::string& statement) {
  std::ifstream in(kScript);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.substr(std::min(line.size(), line.find_first_not_of(' '))) == statement) return number;
  }
  return -1;
}

const model::Frame* python_frame(const model::ThreadDump& thread, const std::string& function) {
  for (const auto& f : thread.frames) {
    if (f.kind == model::Frame::Kind::kPython && f.function == function) return &f;
  }
  return nullptr;
}

std::string local(const model::Frame& frame, const std::string& name) {
  for (const auto& [key, value] : frame.locals) {
    if (key == name) return value;
  }
  return "<absent>";
}

TEST(GlooCapture, MergedStacksShowThePythonCallSitesAndTheirLocals) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing (tools/install-deps.sh)";
  testing::TargetProcess job({kPython, kScript, "--world-size", "2", "--diverged-rank", "1"});
  const pid_t waiting = pid_from_line(job.wait_for_line("rank 0 pid", std::chrono::seconds(120)));
  const pid_t diverged = pid_from_line(job.wait_for_line("rank 1 pid", std::chrono::seconds(120)));
  capture::CaptureOptions options;
  options.locals = true;
  model::ProcessDump dump;
  ASSERT_TRUE(testing::eventually(
      [&] {
        dump = capture::capture_process(waiting, options);
        return thread_with(dump, "gloo::barrier") != nullptr;
      },
      std::chrono::seconds(60)));
  ASSERT_EQ(dump.python, "3.11.2");
  const auto main_it = std::find_if(dump.threads.begin(), dump.threads.end(),
                                    [&](const auto& t) { return t.tid == waiting; });
  ASSERT_NE(main_it, dump.threads.end());
  const auto& main_thread = *main_it;
  EXPECT_EQ(main_thread.merge, "ok");
  // Native wait, then the torch.distributed call, then the script's call site.
  const int wait_at = testing::frame_index(main_thread, "c10d::Work::wait");
  const auto* barrier = python_frame(main_thread, "barrier");
  const auto* call_site = python_frame(main_thread, "run_rank");
  ASSERT_GE(wait_at, 0) << testing::describe_stack(main_thread);
  ASSERT_NE(barrier, nullptr);
  ASSERT_NE(call_site, nullptr);
  EXPECT_LT(wait_at,
            std::distance(main_thread.frames.begin(),
                          std::find_if(main_thread.frames.begin(), main_thread.frames.end(),
                                       [&](const auto& f) { return &f == barrier; })));
  EXPECT_LT(barrier, call_site);
  EXPECT_NE(barrier->file.find("torch/distributed/distributed_c10d.py"), std::string::npos);
  EXPECT_EQ(call_site->file, kScript);
  EXPECT_EQ(call_site->line, script_line("dist.barrier()"));
  EXPECT_EQ(local(*barrier, "group"), "None");                    // the default group
  EXPECT_EQ(local(*barrier, "default_pg"), "<process group 0>");  // known from the registry

  // The diverged rank too prints before it waits: read it until it waits in store.wait (it
  // legitimately moves from its line to there; on a loaded machine one read came first).
  const int store_wait = script_line("store.wait([key], datetime.timedelta(hours=1))");
  model::ProcessDump other;
  const model::Frame* load = nullptr;
  const bool waits = testing::eventually(
      [&] {
        other = capture::capture_process(diverged, options);
        load =
            other.threads.empty() ? nullptr : python_frame(other.threads.front(), "load_weights");
        return load != nullptr && load->line == store_wait;
      },
      std::chrono::seconds(60));
  ASSERT_FALSE(other.threads.empty());
  ASSERT_NE(load, nullptr) << testing::describe_stack(other.threads.front());
  EXPECT_TRUE(waits) << testing::describe_stack(other.threads.front());
  EXPECT_EQ(local(*load, "key"), "'weights/1/ready'");
  EXPECT_EQ(load->line, store_wait);
}

// While `dump --stop-mode all --locals` holds every thread of a gloo rank, only its memory is
// read: no file is opened through /proc/PID/map_files or /proc/PID/root and none is mapped (the
// store classes' symbols in libtorch, which give the store of the group met in the barrier's
// locals, are looked up once the threads run again). Seen from outside, under strace: the system
// calls between the first PTRACE_SEIZE and the last PTRACE_DETACH.
TEST(GlooCapture, NoFileIsOpenedWhileEveryThreadIsHeld) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing (tools/install-deps.sh)";
  if (!testing::have_strace()) {
    GTEST_SKIP() << "strace is not installed (tools/install-deps.sh)";
  }
  testing::TargetProcess job({kPython, kScript, "--world-size", "2", "--diverged-rank", "1"});
  const pid_t waiting = pid_from_line(job.wait_for_line("rank 0 pid", std::chrono::seconds(120)));
  ASSERT_TRUE(testing::eventually(
      [&] {
        return thread_with(capture::capture_process(waiting, {}), "gloo::barrier") != nullptr;
      },
      std::chrono::seconds(60)));
  const std::string trace = testing::temp_path("hangscope-held-trace");
  const auto result = testing::run_command(
      testing::strace_command("ptrace,open,openat,mmap", trace,
                              std::string(HANGSCOPE_BINARY) + " dump --pid " +
                                  std::to_string(waiting) + " --stop-mode all --locals --json"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto text = read_file(trace);
  ::unlink(trace.c_str());
  ASSERT_TRUE(text.text);
  std::vector<std::string> lines;
  std::istringstream in(*text.text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::size_t first = lines.size(), last = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("PTRACE_SEIZE") != std::string::npos && first == lines.size()) first = i;
    if (lines[i].find("PTRACE_DETACH") != std::string::npos) last = i;
  }
  ASSERT_LT(first, last) << *text.text;
  for (std::size_t i = first; i < last; ++i) {
    const auto& line = lines[i];
    const bool file_open =
        line.find("open") != std::string::npos &&
        (line.find("/map_files/") != std::string::npos || line.find("/root/") != std::string::npos);
    const bool file_mapping = line.find("mmap(") != std::string::npos &&
                              line.find("MAP_ANONYMOUS") == std::string::npos &&
                              line.find("resumed") == std::string::npos;
    EXPECT_FALSE(file_open || file_mapping) << "while every thread was held: " << line;
  }
  // The group met in the barrier's locals still has its store (read after the release).
  const auto dump = nlohmann::json::parse(result.out);
  ASSERT_FALSE(dump["distributed"]["groups"].empty()) << dump["distributed"];
  EXPECT_NE(dump["distributed"]["groups"][0].value("store", ""), "") << dump["distributed"];
}
}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

std::vector<int> ints_of(const nlohmann::json& array) {
  std::vector<int> out;
  for (const auto& v : array) out.push_back(v.get<int>());
  return out;
}

// The job is gone, its cores remain: gcore of every rank of a job hung with rank 0 diverged
// (waiting on a store key in load_weights) while ranks 1 and 2 wait in the barrier, then
// `hangscope diagnose --cores DIR`. The ranks come from their memory, the culprit is rank 0,
// and each rank's state is said to be read from its stack.
TEST(GlooCores, DiagnoseCoresOfAHungJobNamesTheDivergedRankZero) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing (tools/install-deps.sh)";
  if (testing::run_command("command -v gcore").exit_code != 0) GTEST_SKIP() << "no gcore (gdb)";
  const std::string dir = testing::temp_path("gloo-cores");
  const std::string bundle = testing::temp_path("gloo-cores-bundle");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  struct Cleanup {
    std::string paths;
    ~Cleanup() { testing::run_command("rm -rf " + paths); }
  } cleanup{dir + " " + bundle};
  testing::TargetProcess job(
      {kPython, kScript, "--world-size", "3", "--diverged-rank", "0", "--timeout", "600"});
  std::vector<pid_t> pids;
  for (int r = 0; r < 3; ++r) {
    pids.push_back(pid_from_line(
        job.wait_for_line("rank " + std::to_string(r) + " pid", std::chrono::seconds(120))));
  }
  model::ProcessDump live;  // rank 1, just before its core
  // Every rank prints before it waits: the cores are taken once all three wait where the verdict
  // expects them (ranks 1 and 2 in gloo's barrier, rank 0 in load_weights' store.wait), not
  // while one is still on its way there.
  const int store_wait = script_line("store.wait([key], datetime.timedelta(hours=1))");
  ASSERT_TRUE(testing::eventually(
      [&] {
        live = capture::capture_process(pids[1], {});
        const auto diverged = capture::capture_process(pids[0], {});
        const auto* load = diverged.threads.empty()
                               ? nullptr
                               : python_frame(diverged.threads.front(), "load_weights");
        return thread_with(live, "gloo::barrier") != nullptr &&
               thread_with(capture::capture_process(pids[2], {}), "gloo::barrier") != nullptr &&
               load != nullptr && load->line == store_wait;
      },
      std::chrono::seconds(60)));
  for (const pid_t pid : pids) {
    ASSERT_EQ(testing::run_command("gcore -o " + dir + "/core " + std::to_string(pid)).exit_code,
              0);
  }
  job.kill_all();  // the job is gone

  // The gloo rank's core reads like the live capture: the same Python frames on every thread,
  // gloo's barrier wait under them.
  const auto core = capture::capture_core(dir + "/core." + std::to_string(pids[1]), {});
  EXPECT_EQ(core.distributed, live.distributed);
  for (const auto& want : live.threads) {
    const auto it = std::find_if(core.threads.begin(), core.threads.end(),
                                 [&](const auto& t) { return t.tid == want.tid; });
    ASSERT_NE(it, core.threads.end()) << "thread " << want.tid;
    EXPECT_EQ(it->python_frames, want.python_frames) << testing::describe_stack(*it);
  }
  EXPECT_NE(thread_with(core, "gloo::barrier"), nullptr);

  const auto result = testing::run_command(std::string(HANGSCOPE_BINARY) + " diagnose --cores " +
                                           dir + " --quiet -o " + bundle);
  EXPECT_EQ(result.exit_code, 3) << result.out << result.err;  // a hang was found
  const auto text = read_file(bundle + "/report.json");
  ASSERT_TRUE(text.text) << result.err;
  const auto report = nlohmann::json::parse(*text.text);
  ASSERT_FALSE(report["verdicts"].empty()) << report["conclusion"];
  const auto& top = report["verdicts"][0];
  EXPECT_EQ(top["id"], "rank-diverged") << report["conclusion"];
  EXPECT_EQ(ints_of(top["diverged_ranks"]), std::vector<int>{0}) << report["conclusion"];
  EXPECT_EQ(ints_of(top["waiting_ranks"]), (std::vector<int>{1, 2})) << report["conclusion"];
  ASSERT_EQ(report["ranks"].size(), 3u);
  for (const auto& r : report["ranks"]) {
    EXPECT_EQ(r["state"], "waiting") << r.dump();
    EXPECT_EQ(r["state_source"], "stack") << r.dump();
    EXPECT_EQ(r["pid"], pids[r["rank"].get<std::size_t>()]) << r.dump();
  }
  EXPECT_EQ(report["ranks"][0]["wait_point"]["function"], "load_weights")
      << report["ranks"][0].dump();
}

}  // namespace
}  // namespace hangscope

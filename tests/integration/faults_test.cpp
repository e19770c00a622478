// Bad input and faults: missing, zombie, kernel and stopped processes, other tracers, state D,
// thread churn, targets that exit mid-capture, and hangscope killed mid-capture.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "hangscope/capture/process_capture.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/proc/task_stat.h"
#include "sigkill_loop.h"
#include "stack_assertions.h"
#include "target_process.h"

namespace hangscope {
namespace {

using testing::find_thread;
using testing::TargetProcess;

std::string capture_error(pid_t pid) {
  try {
    capture::capture_process(pid, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TargetProcess start_target(std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{NATIVE_TARGET};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return TargetProcess(argv);
}

pid_t tid_named(pid_t pid, const std::string& name) {
  const auto dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& [tid, state] : testing::thread_states(pid)) {
    const auto comm = read_file(dir + "/" + std::to_string(tid) + "/comm");
    if (comm.text && *comm.text == name + "\n") return tid;
  }
  return 0;
}

TEST(Faults, MissingPidIsNamedInTheError) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // reaped: the pid no longer exists
  EXPECT_EQ(capture_error(child), "pid " + std::to_string(child) + " does not exist");
}

TEST(Faults, ZombieIsReportedAsSuch) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  // A zombie: the leader in state Z and no other thread left. (Under ThreadSanitizer the child
  // of fork has TSan's background thread too, which exits after the leader shows Z; until then
  // the process is a live one whose leader exited, and is captured as such.)
  ASSERT_TRUE(testing::eventually([&] {
    const auto states = testing::thread_states(child);
    return states.size() == 1 && states.begin()->second == 'Z';
  }));
  const std::string error = capture_error(child);
  ::waitpid(child, nullptr, 0);
  EXPECT_NE(error.find("pid " + std::to_string(child)), std::string::npos) << error;
  EXPECT_NE(error.find("is a zombie"), std::string::npos) << error;
}

TEST(Faults, KernelThreadIsRefusedWithReason) {
  pid_t kthread = 0;
  for (pid_t candidate = 2; candidate < 200 && kthread == 0; ++candidate) {
    const auto read = read_file("/proc/" + std::to_string(candidate) + "/stat");
    if (!read.text) continue;
    const auto stat = proc::parse_task_stat(*read.text);
    if (stat && (stat->flags & proc::kPfKthread)) kthread = candidate;
  }
  if (kthread == 0) GTEST_SKIP() << "no kernel thread visible in this PID namespace";
  const std::string error = capture_error(kthread);
  EXPECT_NE(error.find("pid " + std::to_string(kthread)), std::string::npos) << error;
  EXPECT_NE(error.find("is a kernel thread"), std::string::npos) << error;
}

TEST(Faults, DeletedBinaryIsStillSymbolizedThroughMapFiles) {
  const std::string copy = testing::temp_path("native_target");
  {
    std::ifstream in(NATIVE_TARGET, std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  ASSERT_EQ(::chmod(copy.c_str(), 0700), 0);
  TargetProcess target({copy});
  target.wait_for_line("ready");
  ASSERT_EQ(::unlink(copy.c_str()), 0);  // the running binary is gone from the file system
  const auto dump = capture::capture_process(target.pid(), {});
  EXPECT_TRUE(dump.notes.empty()) << dump.notes.front();
  const auto* cv = find_thread(dump, "cv_waiter");
  ASSERT_NE(cv, nullptr);
  EXPECT_TRUE(testing::has_frames_in_order(*cv, {"wait_on_condition", "cv_middle", "cv_outer"}));
  EXPECT_EQ(cv->frames[static_cast<std::size_t>(testing::frame_index(*cv, "cv_outer"))].module,
            copy);
}

TEST(Faults, StoppedTargetIsCapturedAndStaysStopped) {
  auto target = start_target();
  target.wait_for_line("ready");
  const pid_t pid = target.pid();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  ASSERT_TRUE(testing::eventually([&] {
    for (const auto& [tid, state] : testing::thread_states(pid)) {
      if (state != 'T') return false;
    }
    return true;
  }));
  const auto dump = capture::capture_process(pid, {});
  ASSERT_EQ(dump.threads.size(), 5u);
  for (const auto& t : dump.threads) {
    EXPECT_EQ(t.state, 'T') << t.name;
    EXPECT_FALSE(t.frames.empty()) << testing::describe_stack(t);
  }
  EXPECT_TRUE(testing::has_frames_in_order(*find_thread(dump, "sleeper"), {"sleep_forever"}));
  // Still stopped a while later: hangscope did not resume it.
  ::usleep(100000);
  for (const auto& [tid, state] : testing::thread_states(pid)) EXPECT_EQ(state, 'T') << tid;
  ::kill(pid, SIGCONT);
  EXPECT_TRUE(testing::eventually([&] { return testing::no_thread_stopped(pid); }));
}

TEST(Faults, ThreadHeldByAnotherTracerIsNamedAndTheRestCaptured) {
  auto target = start_target();
  target.wait_for_line("ready");
  const pid_t sleeper = tid_named(target.pid(), "sleeper");
  ASSERT_NE(sleeper, 0);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t tracer = ::fork();
  if (tracer == 0) {
    const char ok = ::ptrace(PTRACE_SEIZE, sleeper, nullptr, nullptr) == 0 ? '1' : '0';
    if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(ok, '1');
  const auto dump = capture::capture_process(target.pid(), {});
  ::kill(tracer, SIGKILL);
  ::waitpid(tracer, nullptr, 0);
  const auto* held = find_thread(dump, "sleeper");
  ASSERT_NE(held, nullptr);
  ASSERT_EQ(held->notes.size(), 1u);
  EXPECT_NE(held->notes[0].find("another tracer (pid " + std::to_string(tracer) + ")"),
            std::string::npos)
      << held->notes[0];
  EXPECT_TRUE(testing::has_frames_in_order(*find_thread(dump, "poller"), {"poll_forever"}));
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

TEST(Faults, UninterruptibleThreadIsReportedWithinBoundedTime) {
  auto target = start_target({"--vfork"});
  target.wait_for_line("ready");
  const pid_t vforker = tid_named(target.pid(), "vforker");
  ASSERT_NE(vforker, 0);
  ASSERT_TRUE(
      testing::eventually([&] { return testing::thread_states(target.pid())[vforker] == 'D'; }));
  capture::CaptureOptions options;
  options.freeze.stop_timeout = std::chrono::milliseconds(50);
  const auto begin = std::chrono::steady_clock::now();
  const auto dump = capture::capture_process(target.pid(), options);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(2));
  const auto* stuck = find_thread(dump, "vforker");
  ASSERT_NE(stuck, nullptr);
  EXPECT_EQ(stuck->state, 'D');
  EXPECT_FALSE(stuck->wchan.empty());
  ASSERT_FALSE(stuck->notes.empty());
  EXPECT_NE(stuck->notes[0].find("did not stop within 50 ms"), std::string::npos)
      << stuck->notes[0];
  EXPECT_TRUE(testing::has_frames_in_order(*find_thread(dump, "cv_waiter"), {"wait_on_condition"}));
  // The D thread was never left in a ptrace stop; the rest run on.
  ::usleep(50000);
  EXPECT_EQ(testing::thread_states(target.pid())[vforker], 'D');
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

TEST(Faults, ProcessBudgetBoundsACaptureOfManyStuckThreads) {
  auto target = start_target({"--vfork", "--extra-threads", "20"});
  target.wait_for_line("ready");
  capture::CaptureOptions options;
  options.freeze.stop_timeout = std::chrono::milliseconds(200);
  options.freeze.process_budget = std::chrono::milliseconds(1);  // spent before most threads
  const auto begin = std::chrono::steady_clock::now();
  const auto dump = capture::capture_process(target.pid(), options);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(2));
  int skipped = 0;
  for (const auto& t : dump.threads) {
    for (const auto& note : t.notes) skipped += note.find("capture budget") != std::string::npos;
  }
  EXPECT_GT(skipped, 0);
  EXPECT_EQ(dump.threads.size(), 26u);  // every thread is still listed
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

TEST(Faults, ThreadChurnNeverFailsTheCapture) {
  auto target = start_target({"--churn"});
  target.wait_for_line("ready");
  for (int i = 0; i < 30; ++i) {
    const auto dump = capture::capture_process(target.pid(), {});
    EXPECT_TRUE(testing::has_frames_in_order(*find_thread(dump, "poller"), {"poll_forever"}));
    ASSERT_NE(find_thread(dump, "churner"), nullptr);
  }
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

TEST(Faults, TargetExitingMidCaptureGivesADumpOrAClearError) {
  int dumps = 0, errors = 0;
  for (int round = 0; round < 5; ++round) {
    auto target = start_target({"--extra-threads", "100", "--exit-after-ms", "5"});
    target.wait_for_line("ready");
    while (!target.try_reap()) {
      try {
        capture::capture_process(target.pid(), {});
        ++dumps;
      } catch (const Error& e) {
        ++errors;
        EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(target.pid())),
                  std::string::npos)
            << e.what();
      }
    }
  }
  EXPECT_GT(dumps + errors, 0);
}

TEST(Faults, SigkillOfHangscopeNeverLeavesTheTargetStopped) {
  auto target = start_target({"--extra-threads", "40"});
  target.wait_for_line("ready");
  for (const char* mode : {"each", "all"}) {
    const auto result = testing::sigkill_loop(target.pid(), 20, 20000, mode, 42);
    EXPECT_EQ(result.left_stopped, 0) << mode;
    EXPECT_GT(result.killed_mid_capture, 0) << mode;
  }
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

}  // namespace
}  // namespace hangscope

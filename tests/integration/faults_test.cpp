// Bad input and faults: missing, zombie, kernel and stopped processes, other tracers, state D,
// thread churn, targets that exit mid-capture, and hangscope killed or stopped mid-capture.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <tuple>

#include "command.h"
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
using namespace std::chrono_literals;

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

// --- hangscope stopped mid-capture (issue 30, item 4): Ctrl-Z, background terminal I/O and
// SIGSTOP of `hangscope dump` while it holds a 2,000-thread target.

constexpr const char* kManyThreads = "2000";

// `hangscope ARGS...` as a child in a process group of its own: the group is not orphaned (its
// parent, this test, is in another group of the same session), so job-control signals do stop
// it. stdout goes to /dev/null, stderr to a file. Killed and reaped on every path.
class HangscopeRun {
 public:
  explicit HangscopeRun(const std::vector<std::string>& args)
      : stderr_path_(testing::temp_path("stderr")) {
    std::vector<char*> argv{const_cast<char*>(HANGSCOPE_BINARY)};
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int out = ::open("/dev/null", O_WRONLY);
      const int err = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (out < 0 || err < 0) ::_exit(127);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
      ::execv(HANGSCOPE_BINARY, argv.data());
      ::_exit(127);
    }
    if (pid_ > 0) ::setpgid(pid_, pid_);
  }
  ~HangscopeRun() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    ::unlink(stderr_path_.c_str());
  }
  HangscopeRun(const HangscopeRun&) = delete;
  HangscopeRun& operator=(const HangscopeRun&) = delete;

  pid_t pid() const { return pid_; }
  // The wait status once it has ended (reaped then), or nothing within the timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    testing::eventually(
        [&] {
          int status = 0;
          if (!status_ && ::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
          return status_.has_value();
        },
        timeout);
    return status_;
  }
  std::string error_output() const { return read_file(stderr_path_).text.value_or(""); }

 private:
  std::string stderr_path_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

std::string task_comm(pid_t pid, pid_t tid) {
  const auto read =
      read_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  return read.text.value_or("");
}

int threads_held(pid_t pid) {
  int held = 0;
  for (const auto& [tid, state] : testing::thread_states(pid)) held += state == 't' || state == 'T';
  return held;
}

// hangscope is holding threads of the target: its tracer thread runs and some target thread is
// in a ptrace stop (each mode: one of the batches, which follow each other closely; all mode:
// the first threads, held until every thread is copied).
bool mid_capture(pid_t hangscope, pid_t target) {
  bool tracing = false;
  for (const auto& [tid, state] : testing::thread_states(hangscope)) {
    tracing = tracing || task_comm(hangscope, tid) == "hangscope-trace\n";
  }
  return tracing && threads_held(target) > 0;
}

// Every thread of pid is in a group stop (T).
bool stopped(pid_t pid) {
  const auto states = testing::thread_states(pid);
  if (states.empty()) return false;
  for (const auto& [tid, state] : states) {
    if (state != 'T') return false;
  }
  return true;
}

// The watchdog that hangscope forked: the child named hangscope-watch (0: none).
pid_t watchdog_of(pid_t hangscope) {
  pid_t found = 0;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  while (const dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    const auto read = read_file("/proc/" + std::to_string(pid) + "/stat");
    if (!read.text) continue;
    const auto stat = proc::parse_task_stat(*read.text);
    if (stat && stat->ppid == hangscope && stat->comm == "hangscope-watch") found = pid;
  }
  ::closedir(proc);
  return found;
}

bool gone_or_zombie(pid_t pid) {
  const auto states = testing::thread_states(pid);
  return states.empty() || states.begin()->second == 'Z';
}

std::string signal_label(int sig) {
  return sig == SIGTSTP ? "SIGTSTP" : sig == SIGTTIN ? "SIGTTIN" : sig == SIGTTOU ? "SIGTTOU" : "?";
}

class JobControlStopOfHangscope : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

// Ctrl-Z (SIGTSTP), or SIGTTIN/SIGTTOU, reaches hangscope while it holds threads: it stops only
// once they are released, and finishes normally when continued.
TEST_P(JobControlStopOfHangscope, WaitsUntilTheTargetIsReleasedThenStops) {
  const auto& [sig, mode] = GetParam();
  auto target = start_target({"--extra-threads", kManyThreads});
  target.wait_for_line("ready", 120s);
  HangscopeRun dump({"dump", "--pid", std::to_string(target.pid()), "--stop-mode", mode});
  ASSERT_GT(dump.pid(), 0);
  ASSERT_TRUE(testing::eventually([&] { return mid_capture(dump.pid(), target.pid()); }, 60s))
      << "the capture was not seen in progress; stderr: " << dump.error_output();
  ASSERT_EQ(::kill(dump.pid(), sig), 0);
  ASSERT_TRUE(testing::eventually([&] { return stopped(dump.pid()); }, 60s))
      << signal_label(sig) << " did not stop hangscope; stderr: " << dump.error_output();
  // hangscope is stopped, and nothing of the target is held while it stays so.
  EXPECT_EQ(threads_held(target.pid()), 0);
  ::usleep(200000);
  EXPECT_TRUE(stopped(dump.pid()));
  EXPECT_EQ(threads_held(target.pid()), 0);
  ASSERT_EQ(::kill(dump.pid(), SIGCONT), 0);
  const auto status = dump.wait(120s);
  ASSERT_TRUE(status.has_value()) << "hangscope did not finish after SIGCONT";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << "wait status " << *status << "; stderr: " << dump.error_output();
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

INSTANTIATE_TEST_SUITE_P(Faults, JobControlStopOfHangscope,
                         ::testing::Combine(::testing::Values(SIGTSTP, SIGTTIN, SIGTTOU),
                                            ::testing::Values("all", "each")),
                         [](const auto& param_info) {
                           return signal_label(std::get<0>(param_info.param)).substr(3) + "_" +
                                  std::get<1>(param_info.param);
                         });

// The agent runs the same capture code: Ctrl-Z of `hangscope collect` while it captures for a
// diagnose holds nothing either, and the agent answers once continued.
TEST(Faults, JobControlStopOfTheAgentWaitsUntilTheTargetIsReleased) {
  auto target = start_target({"--extra-threads", kManyThreads});
  target.wait_for_line("ready", 120s);
  TargetProcess agent({HANGSCOPE_BINARY, "collect", "--listen", "127.0.0.1:0", "--pid",
                       std::to_string(target.pid())});
  const std::string address = agent.wait_for_line("listening on ").substr(13);
  const std::string bundle = testing::temp_path("bundle");
  HangscopeRun diagnose({"diagnose", "--agents", address, "--samples", "1", "-o", bundle});
  ASSERT_TRUE(testing::eventually([&] { return mid_capture(agent.pid(), target.pid()); }, 60s))
      << "the agent's capture was not seen in progress; diagnose: " << diagnose.error_output();
  ASSERT_EQ(::kill(agent.pid(), SIGTSTP), 0);
  ASSERT_TRUE(testing::eventually([&] { return stopped(agent.pid()); }, 60s));
  EXPECT_EQ(threads_held(target.pid()), 0);
  ::usleep(200000);
  EXPECT_TRUE(stopped(agent.pid()));
  EXPECT_EQ(threads_held(target.pid()), 0);
  ASSERT_EQ(::kill(agent.pid(), SIGCONT), 0);
  // The target is no rank, so diagnose ends with "no rank process found" (exit 1), but only
  // once the agent has answered.
  const auto status = diagnose.wait(120s);
  ASSERT_TRUE(status.has_value()) << "diagnose did not finish after the agent was continued";
  EXPECT_TRUE(WIFEXITED(*status)) << "wait status " << *status;
  EXPECT_EQ(diagnose.error_output().find("unreachable"), std::string::npos)
      << diagnose.error_output();
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
  std::system(("rm -rf " + bundle).c_str());
}

// The stop watchdog is forked before the capture reads the target's maps and opens its modules:
// a fork write-protects every page the process has then, and each of them written afterwards is
// copied once, so a watchdog forked late made a one-shot dump pay for all of them.
TEST(Faults, TheStopWatchdogIsForkedBeforeTheTargetIsRead) {
  if (!testing::have_strace()) GTEST_SKIP() << "strace is not installed (tools/install-deps.sh)";
  auto target = start_target();
  target.wait_for_line("ready");
  const std::string trace = testing::temp_path("hangscope-watchdog-trace");
  const auto result = testing::run_command(testing::strace_command(
      "clone,clone3,fork,vfork,open,openat", trace,
      std::string(HANGSCOPE_BINARY) + " dump --pid " + std::to_string(target.pid())));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream in(trace);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(trace.c_str());
  // A fork is a clone that makes a process (no CLONE_THREAD); the first read of the target is
  // its maps.
  const std::regex fork_line(R"(\b(clone|clone3|fork|vfork)\((?![^\n]*CLONE_THREAD))");
  const std::string maps = "\"/proc/" + std::to_string(target.pid()) + "/maps\"";
  int line_number = 0, forked_at = -1, maps_at = -1;
  std::istringstream lines(text.str());
  for (std::string line; std::getline(lines, line); ++line_number) {
    if (forked_at < 0 && std::regex_search(line, fork_line)) forked_at = line_number;
    if (maps_at < 0 && line.find(maps) != std::string::npos) maps_at = line_number;
  }
  ASSERT_GE(maps_at, 0) << "the target's maps were never opened:\n" << text.str();
  ASSERT_GE(forked_at, 0) << "no watchdog was forked:\n" << text.str();
  EXPECT_LT(forked_at, maps_at) << text.str();
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

class StopSignalOfHangscope : public ::testing::TestWithParam<std::string> {};

// SIGSTOP cannot be caught: when hangscope stays stopped while it holds threads, its watchdog
// kills it within the bound and the kernel releases them. A SIGSTOP that lands between two
// batches (each mode) holds nothing: hangscope then finishes once continued, and the run is
// tried again (up to 5 runs) until one lands inside a held window; so is a run that ended before
// this test saw it hold a thread.
TEST_P(StopSignalOfHangscope, LeavesTheTargetHeldForAtMostTheWatchdogsBound) {
  const std::string mode = GetParam();
  auto target = start_target({"--extra-threads", kManyThreads});
  target.wait_for_line("ready", 120s);
  int killed = 0;
  for (int run = 0; run < 5 && killed == 0; ++run) {
    HangscopeRun dump({"dump", "--pid", std::to_string(target.pid()), "--stop-mode", mode});
    ASSERT_GT(dump.pid(), 0);
    // A loaded machine may look too late: the dump then ends unseen, and the run is tried again.
    ASSERT_TRUE(testing::eventually(
        [&] { return mid_capture(dump.pid(), target.pid()) || dump.wait(0ms).has_value(); }, 60s))
        << "the capture was not seen in progress; stderr: " << dump.error_output();
    if (const auto ended = dump.wait(0ms)) {
      EXPECT_TRUE(WIFEXITED(*ended) && WEXITSTATUS(*ended) == 0) << dump.error_output();
      continue;
    }
    ASSERT_EQ(::kill(dump.pid(), SIGSTOP), 0);
    const auto sent = std::chrono::steady_clock::now();
    // Seen stopped, or already killed by the watchdog if this test was starved for a second.
    ASSERT_TRUE(testing::eventually(
        [&] { return stopped(dump.pid()) || dump.wait(0ms).has_value(); }, 60s));
    const bool held = dump.wait(0ms).has_value() || threads_held(target.pid()) > 0;
    const pid_t watchdog = watchdog_of(dump.pid());  // forked before the first thread was held
    EXPECT_TRUE(testing::eventually([&] { return testing::no_thread_stopped(target.pid()); }, 60s))
        << threads_held(target.pid()) << " threads still held";
    const auto released = std::chrono::steady_clock::now() - sent;
    if (!held) {
      ASSERT_EQ(::kill(dump.pid(), SIGCONT), 0);
      const auto status = dump.wait(120s);
      ASSERT_TRUE(status.has_value());
      EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << dump.error_output();
      continue;
    }
    const auto status = dump.wait(60s);
    ASSERT_TRUE(status.has_value()) << "hangscope was not killed";
    EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << "wait status " << *status;
    EXPECT_NE(dump.error_output().find("watchdog"), std::string::npos) << dump.error_output();
    std::printf("SIGSTOP in %s mode: target released %lld ms after the signal\n", mode.c_str(),
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(released).count()));
    // The watchdog (its message above says it ran) does not outlive hangscope.
    if (watchdog != 0) {
      EXPECT_TRUE(testing::eventually([&] { return gone_or_zombie(watchdog); }));
    }
    ++killed;
  }
  EXPECT_EQ(killed, 1) << "no SIGSTOP landed while hangscope held threads in 5 runs";
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
}

INSTANTIATE_TEST_SUITE_P(Faults, StopSignalOfHangscope, ::testing::Values("all", "each"),
                         [](const auto& param_info) { return std::string(param_info.param); });

}  // namespace
}  // namespace hangscope

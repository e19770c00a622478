// asyncio tasks read from a live process's memory (python/async_tasks), against what the
// interpreter itself reports: tests/fixtures/python/asyncio_target.py holds nested awaits,
// tasks awaiting tasks, futures, an Event, a gather, a TaskGroup, eager, finished, cancelled,
// named and unnamed tasks, tasks inside async generators (nested `async for`, asend, athrow,
// aclose), a few thousand more, a task that runs on a second thread's loop and one of a loop no
// thread runs. After hangscope has read it, it walks its own registries and each task's
// cr_await chain (through the async generator each asend/athrow drives) and writes them as JSON;
// every task must agree, one by one (name, state, loop and its thread, running, each coroutine's
// function, file and line, what it awaits). On every CPython 3.10+ of the machine, and on uvloop
// (Debian's python3-uvloop).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "hangscope/capture/core_capture.h"
#include "hangscope/capture/process_capture.h"
#include "hangscope/report/dump_format.h"
#include "python_targets.h"
#include "target_process.h"

namespace hangscope {
namespace {

const std::string kScript = HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/asyncio_target.py";
constexpr int kManyTasks = 2000;

struct AsyncTarget {
  testing::PythonInterpreter python;
  bool uvloop = false;
  std::string label;
};

void PrintTo(const AsyncTarget& target, std::ostream* out) {
  *out << target.label;
}

std::vector<AsyncTarget> async_targets() {
  std::vector<AsyncTarget> targets;
  for (const auto& python : testing::python_interpreters()) {
    targets.push_back({python, false, python.label});
    const auto probe = testing::run_command(python.path + " -c 'import uvloop' 2>/dev/null");
    if (probe.exit_code == 0) targets.push_back({python, true, python.label + "_uvloop"});
  }
  return targets;
}

// The fixture, started and ready; its report is written on request (SIGUSR1).
class AsyncFixture {
 public:
  AsyncFixture(const AsyncTarget& target, int tasks)
      : report_(testing::temp_path("asyncio-report")), process_(arguments(target, report_, tasks)) {
    process_.wait_for_line("ready", std::chrono::seconds(60));
  }
  ~AsyncFixture() { ::unlink(report_.c_str()); }

  pid_t pid() const { return process_.pid(); }

  nlohmann::json report() {
    ::kill(process_.pid(), SIGUSR1);
    const bool written = testing::eventually([&] { return ::access(report_.c_str(), R_OK) == 0; },
                                             std::chrono::seconds(30));
    if (!written) throw std::runtime_error("the fixture wrote no report to " + report_);
    std::ifstream in(report_);
    return nlohmann::json::parse(in);
  }

 private:
  static std::vector<std::string> arguments(const AsyncTarget& target, const std::string& report,
                                            int tasks) {
    std::vector<std::string> argv = {target.python.path, kScript, report, "--tasks",
                                     std::to_string(tasks)};
    if (target.uvloop) argv.push_back("--uvloop");
    return argv;
  }

  std::string report_;
  testing::TargetProcess process_;
};

model::ProcessDump capture_tasks(pid_t pid) {
  capture::CaptureOptions options;
  options.freeze.mode = native::StopMode::kAllThreads;  // the spinning thread too: one instant
  options.tasks = true;
  return capture::capture_process(pid, options);
}

bool in_asyncio(const std::string& file) {
  return file.find("/asyncio/") != std::string::npos;
}

// What hangscope should say a task awaits, by the rule docs/python-capture.md states: the
// task it awaits, else the asyncio function it is parked in, else the waiter's type.
std::string expected_awaits(const nlohmann::json& inside) {
  if (inside["waiter"].is_null() || inside["waiter_is_task"].get<bool>()) return "";
  const auto& chain = inside["chain"];
  if (!chain.empty() && in_asyncio(chain[0]["file"].get<std::string>())) {
    return chain[0]["qualname"].get<std::string>();
  }
  return inside["waiter_type"].get<std::string>();
}

// Differences between one task as read and as the interpreter reports it ("" when none).
std::string compare_task(const model::AsyncTask& read, const nlohmann::json& inside) {
  std::ostringstream diff;
  const auto expect = [&](bool same, const std::string& what, const auto& ours,
                          const auto& theirs) {
    if (!same) diff << "  " << what << ": read " << ours << ", reported " << theirs << "\n";
  };
  expect(read.name == inside["name"].get<std::string>(), "name", read.name, inside["name"]);
  expect(report::task_state_name(read.state) == inside["state"].get<std::string>(), "state",
         report::task_state_name(read.state), inside["state"]);
  expect(read.eager == inside["eager"].get<bool>(), "eager", read.eager, inside["eager"]);
  expect(read.running == inside["running"].get<bool>(), "running", read.running, inside["running"]);
  expect(read.loop == inside["loop"].get<std::uint64_t>(), "loop", read.loop, inside["loop"]);
  const std::string tid = read.tid ? std::to_string(*read.tid) : "null";
  expect(tid == inside["tid"].dump(), "tid", tid, inside["tid"]);
  const auto& chain = inside["chain"];
  expect(read.coroutine.size() == chain.size(), "coroutines", read.coroutine.size(), chain.size());
  for (std::size_t i = 0; i < std::min(read.coroutine.size(), chain.size()); ++i) {
    const auto& frame = read.coroutine[i];
    const std::string ours =
        frame.qualname + " " + frame.function + " " + frame.file + ":" + std::to_string(frame.line);
    const std::string theirs = chain[i]["qualname"].get<std::string>() + " " +
                               chain[i]["function"].get<std::string>() + " " +
                               chain[i]["file"].get<std::string>() + ":" +
                               std::to_string(chain[i]["line"].get<int>());
    expect(ours == theirs, "coroutine #" + std::to_string(i), ours, theirs);
  }
  if (inside["waiter_is_task"].get<bool>()) {
    expect(read.awaited_task == inside["waiter"].get<std::uint64_t>(), "awaited task",
           read.awaited_task.value_or(0), inside["waiter"]);
  } else {
    expect(!read.awaited_task, "awaited task", read.awaited_task.value_or(0), "none");
    expect(read.awaits == expected_awaits(inside), "awaits", read.awaits, expected_awaits(inside));
  }
  return diff.str();
}

class AsyncioTasks : public ::testing::TestWithParam<AsyncTarget> {};

TEST_P(AsyncioTasks, EveryTaskIsWhatTheInterpreterReports) {
  AsyncFixture target(GetParam(), kManyTasks);
  const auto dump = capture_tasks(target.pid());
  const auto report = target.report();
  for (const auto& note : dump.notes) EXPECT_EQ(note.find("asyncio"), std::string::npos) << note;

  std::map<std::uint64_t, const model::AsyncTask*> read;
  for (const auto& task : dump.tasks) read[task.address] = &task;
  EXPECT_EQ(read.size(), dump.tasks.size()) << "a task was read twice";
  ASSERT_GE(report["tasks"].size(), static_cast<std::size_t>(kManyTasks + 10));
  EXPECT_EQ(dump.tasks.size(), report["tasks"].size());

  int failures = 0;
  std::map<std::string, int> seen;  // named tasks found and agreeing
  for (const auto& inside : report["tasks"]) {
    const auto name = inside["name"].get<std::string>();
    const auto it = read.find(inside["address"].get<std::uint64_t>());
    if (it == read.end()) {
      ADD_FAILURE() << "task \"" << name << "\" was not read";
      if (++failures > 10) break;
      continue;
    }
    const auto diff = compare_task(*it->second, inside);
    if (!diff.empty()) {
      ADD_FAILURE() << "task \"" << name << "\" differs:\n" << diff;
      if (++failures > 10) break;
      continue;
    }
    ++seen[name.rfind("Task-", 0) == 0 ? "unnamed" : name];
  }
  // The kinds of tasks the fixture makes were all there, read right.
  std::vector<std::string> kinds = {"nested",     "on-event",      "on-gather",   "finished",
                                    "cancelled",  "never-started", "unnamed",     "agen-nested",
                                    "agen-queue", "agen-asend",    "agen-athrow", "agen-aclose"};
  const auto& version = report["python"];
  if (version[1].get<int>() >= 11) kinds.push_back("group-parent");
  if (version[1].get<int>() >= 12) kinds.push_back("eager-parked");
  for (const auto& kind : kinds) EXPECT_GT(seen[kind], 0) << kind;
  EXPECT_GE(seen["unnamed"], kManyTasks);

  // Spot checks a reader of the dump relies on.
  std::size_t running = 0, eager_running = 0, without_thread = 0;
  for (const auto& task : dump.tasks) {
    if (task.running && !task.coroutine.empty() &&
        task.coroutine.back().function == "spin_caller") {
      ++running;
      if (task.eager) ++eager_running;
    }
    if (!task.tid) ++without_thread;
  }
  EXPECT_EQ(running, 1u) << "the spinning task";
  EXPECT_EQ(eager_running, version[1].get<int>() >= 12 ? 1u : 0u) << "the spinner starts eagerly";
  EXPECT_EQ(without_thread, 1u) << "only the never-run loop's task has no thread";

  // No async generator step leaves a note. `async for` two deep: the chain goes on into both async
  // generators' frames, down to the one that awaits the Future (the comparison above checks each
  // frame's file and line).
  for (const auto& task : dump.tasks) {
    if (task.name.rfind("agen-", 0) == 0) {
      EXPECT_TRUE(task.notes.empty()) << task.name << ": " << task.notes.front();
    }
    if (task.name != "agen-nested") continue;
    ASSERT_EQ(task.coroutine.size(), 3u);
    EXPECT_EQ(task.coroutine[0].function, "numbers");
    EXPECT_EQ(task.coroutine[1].function, "doubled");
    EXPECT_EQ(task.awaits, "Future");
  }
}

INSTANTIATE_TEST_SUITE_P(Installed, AsyncioTasks, ::testing::ValuesIn(async_targets()),
                         [](const auto& param_info) { return param_info.param.label; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AsyncioTasks);

// `hangscope dump --tasks` prints each task under the thread whose loop runs it, and --json
// lists them with the keys docs/cli.md documents.
TEST(AsyncioTasksCli, DumpShowsTasksUnderTheirThread) {
  const auto targets = async_targets();
  if (targets.empty()) GTEST_SKIP() << "no CPython 3.10+ on this machine";
  AsyncFixture target(targets.front(), 20);
  const std::string pid = std::to_string(target.pid());
  const auto text = testing::run_command(std::string(HANGSCOPE_BINARY) + " dump --pid " + pid +
                                         " --tasks --stop-mode all");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const auto thread_at = text.out.find("\nThread " + pid + " ");
  const auto loop_at = text.out.find("asyncio tasks of loop 0x", thread_at);
  const auto nested_at = text.out.find("Task \"nested\" pending, awaits Future\n", loop_at);
  ASSERT_NE(thread_at, std::string::npos) << text.out;
  ASSERT_NE(loop_at, std::string::npos) << text.out;
  ASSERT_NE(nested_at, std::string::npos) << text.out;
  EXPECT_NE(text.out.find("[py] leaf (", nested_at), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(no thread runs it)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Task \"never-started\" pending"), std::string::npos) << text.out;

  const auto json = testing::run_command(std::string(HANGSCOPE_BINARY) + " dump --pid " + pid +
                                         " --tasks --json --python-only");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto dump = nlohmann::json::parse(json.out);
  bool nested = false;
  for (const auto& task : dump["tasks"]) {
    for (const char* key : {"address", "loop", "tid", "name", "state", "eager", "running",
                            "coroutine", "awaited_task", "awaits", "notes"}) {
      EXPECT_TRUE(task.contains(key)) << key;
    }
    if (task["name"] == "nested") {
      nested = true;
      EXPECT_EQ(task["tid"], target.pid());
      EXPECT_EQ(task["awaits"], "Future");
      ASSERT_EQ(task["coroutine"].size(), 3u);
      EXPECT_EQ(task["coroutine"][0]["function"], "leaf");
      EXPECT_EQ(task["coroutine"][2]["function"], "outer");
    }
  }
  EXPECT_TRUE(nested) << json.out;
}

}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

// A core holds the tasks too: gcore of the fixture, read with `hangscope dump --core --tasks`'s
// reader, gives the tasks a live read gave just before (the spinning task aside: it runs).
TEST(AsyncioTasksCore, ACoresTasksAreTheLiveOnes) {
  if (testing::run_command("command -v gcore").exit_code != 0) GTEST_SKIP() << "no gcore (gdb)";
  const auto targets = async_targets();
  ASSERT_FALSE(targets.empty());
  AsyncFixture target(targets.back(), 50);
  const auto live = capture_tasks(target.pid());
  const std::string prefix = testing::temp_path("asyncio-core");
  ASSERT_EQ(
      testing::run_command("gcore -o " + prefix + " " + std::to_string(target.pid())).exit_code, 0);
  const std::string core_path = prefix + "." + std::to_string(target.pid());
  capture::CoreOptions options;
  options.tasks = true;
  const auto core = capture::capture_core(core_path, options);
  ::unlink(core_path.c_str());
  ASSERT_EQ(core.tasks.size(), live.tasks.size());
  std::map<std::uint64_t, const model::AsyncTask*> by_address;
  for (const auto& task : core.tasks) by_address[task.address] = &task;
  int compared = 0;
  for (const auto& want : live.tasks) {
    const auto it = by_address.find(want.address);
    ASSERT_NE(it, by_address.end()) << want.name;
    if (want.running) continue;
    const auto& got = *it->second;
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.state, want.state) << want.name;
    EXPECT_EQ(got.coroutine, want.coroutine) << want.name;
    EXPECT_EQ(got.awaited_task, want.awaited_task) << want.name;
    EXPECT_EQ(got.awaits, want.awaits) << want.name;
    EXPECT_EQ(got.tid, want.tid) << want.name;
    ++compared;
  }
  EXPECT_GE(compared, 50);
}

}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

// `--tasks --locals`: each coroutine frame of each task carries its own locals (which request a
// stuck handler serves), secrets masked; tasks whose chains differ only in locals are printed
// apart, and without --locals the same tasks are one entry. On every CPython 3.10+.
class AsyncioTaskLocals : public ::testing::TestWithParam<testing::PythonInterpreter> {};

TEST_P(AsyncioTaskLocals, EachRequestsFramesCarryItsOwnLocalsWithSecretsMasked) {
  constexpr int kRequests = 6;
  testing::TargetProcess target({GetParam().path,
                                 HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/asyncio_requests.py",
                                 std::to_string(kRequests)});
  target.wait_for_line("ready");
  capture::CaptureOptions options;
  options.stacks = capture::StackKinds::kPythonOnly;
  options.tasks = true;
  options.locals = true;  // thread frames only: snapshots keep tasks' chains shareable
  const auto snapshot_like = capture::capture_process(target.pid(), options);
  EXPECT_GE(snapshot_like.tasks.size(), static_cast<std::size_t>(kRequests));
  for (const auto& task : snapshot_like.tasks) {
    for (const auto& frame : task.coroutine) EXPECT_TRUE(frame.locals.empty()) << task.name;
  }
  options.task_locals = true;
  const auto dump = capture::capture_process(target.pid(), options);
  int requests = 0;
  for (const auto& task : dump.tasks) {
    if (task.name.rfind("request-", 0) != 0) continue;
    ++requests;
    const int i = std::stoi(task.name.substr(8));
    const auto& chain = task.coroutine;
    ASSERT_GE(chain.size(), 3u) << task.name;  // Event.wait, wait_for_output, handle_request
    std::map<std::string, std::map<std::string, std::string>> locals;
    for (const auto& frame : chain) {
      locals[frame.function].insert(frame.locals.begin(), frame.locals.end());
    }
    ASSERT_TRUE(locals.count("handle_request")) << task.name;
    EXPECT_EQ(locals["handle_request"]["request_id"], "'req-" + std::to_string(i) + "'");
    EXPECT_EQ(locals["handle_request"]["max_tokens"], std::to_string(16 + i));
    EXPECT_EQ(locals["handle_request"]["prompt_tokens"], std::to_string(2 * (16 + i)));
    EXPECT_EQ(locals["handle_request"]["api_key"], "<masked>");
    EXPECT_EQ(locals["wait_for_output"]["waited_for"], "'req-" + std::to_string(i) + "'");
  }
  EXPECT_EQ(requests, kRequests);

  const std::string dump_command = std::string(HANGSCOPE_BINARY) +
                                   " dump --python-only --tasks --pid " +
                                   std::to_string(target.pid());
  const auto with_locals = testing::run_command(dump_command + " --locals");
  ASSERT_EQ(with_locals.exit_code, 0) << with_locals.err;
  EXPECT_NE(with_locals.out.find("request_id = 'req-5'"), std::string::npos) << with_locals.out;
  EXPECT_EQ(with_locals.out.find("sk-planted-key"), std::string::npos) << with_locals.out;
  const auto grouped = testing::run_command(dump_command);
  ASSERT_EQ(grouped.exit_code, 0) << grouped.err;
  EXPECT_NE(grouped.out.find("    6 tasks (\"request-"), std::string::npos) << grouped.out;
}

INSTANTIATE_TEST_SUITE_P(Installed, AsyncioTaskLocals,
                         ::testing::ValuesIn(testing::python_interpreters()),
                         [](const auto& param_info) { return param_info.param.label; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AsyncioTaskLocals);

}  // namespace
}  // namespace hangscope

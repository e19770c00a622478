// Python stacks of real interpreters (every CPython 3.10+ on the machine), compared frame for
// frame with the ground truth each target writes about itself (sys._current_frames()).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hangscope/capture/process_capture.h"
#include "hangscope/common/files.h"
#include "hangscope/proc/task_stat.h"
#include "python_targets.h"
#include "stack_assertions.h"
#include "target_process.h"

namespace hangscope {
namespace {

using testing::PythonInterpreter;

const std::string kTarget = HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/py_target.py";

// A py_target.py process and the ground truth it wrote.
struct PythonTarget {
  std::string truth_path = testing::temp_path("truth.json");
  testing::TargetProcess process;
  nlohmann::json truth;

  PythonTarget(const std::vector<std::string>& prefix, const std::string& python,
               std::vector<std::string> extra = {})
      : process([&] {
          std::vector<std::string> argv = prefix;
          argv.insert(argv.end(), {python, kTarget, "--truth", truth_path});
          argv.insert(argv.end(), extra.begin(), extra.end());
          return argv;
        }()) {
    process.wait_for_line("ready");
    // The reporter thread prints "ready" and then parks: read the target once it has (the
    // spinner of --gil keeps running).
    const bool spinner = std::find(extra.begin(), extra.end(), "--gil") != extra.end();
    EXPECT_TRUE(testing::wait_until_settled(process.pid(), spinner ? 1 : 0));
    std::ifstream in(truth_path);
    truth = nlohmann::json::parse(in);
  }
  ~PythonTarget() { ::unlink(truth_path.c_str()); }
};

std::string describe(const nlohmann::json& frames) {
  std::ostringstream out;
  for (const auto& f : frames) {
    out << "  " << f["qualname"].get<std::string>() << " " << f["file"].get<std::string>() << ":"
        << f["line"] << "\n";
  }
  return out.str();
}

std::string describe(const model::FrameList& frames) {
  std::ostringstream out;
  for (const auto& f : frames) out << "  " << f.qualname << " " << f.file << ":" << f.line << "\n";
  return out.str();
}

// Every frame must match: function, qualified name (3.11+), file, line.
::testing::AssertionResult same_frames(const nlohmann::json& truth, const model::FrameList& got,
                                       bool qualnames) {
  const auto fail = [&](const std::string& why) {
    return ::testing::AssertionFailure() << why << "\nexpected:\n"
                                         << describe(truth) << "got:\n"
                                         << describe(got);
  };
  if (truth.size() != got.size()) return fail("frame counts differ");
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto& want = truth[i];
    const auto& have = got[i];
    if (have.kind != model::Frame::Kind::kPython)
      return fail("frame " + std::to_string(i) + " is not Python");
    if (want["function"] != have.function || want["file"] != have.file ||
        want["line"] != have.line || (qualnames && want["qualname"] != have.qualname)) {
      return fail("frame " + std::to_string(i) + " differs");
    }
  }
  return ::testing::AssertionSuccess();
}

model::FrameList python_only(const model::FrameList& frames) {
  std::vector<model::Frame> out;
  for (const auto& f : frames) {
    if (f.kind == model::Frame::Kind::kPython) out.push_back(f);
  }
  return out;
}

// The innermost id in a thread's NSpid line: the id the target sees for itself.
pid_t namespace_tid(pid_t pid, pid_t tid) {
  const auto read =
      read_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
  if (!read.text) return 0;
  const auto status = proc::parse_task_status(*read.text);
  return status.ns_pids.empty() ? 0 : status.ns_pids.back();
}

void expect_matches_truth(const model::ProcessDump& dump, const nlohmann::json& truth,
                          bool merged) {
  const bool qualnames = truth["python"].get<std::string>().rfind("3.10", 0) != 0;
  ASSERT_TRUE(dump.python.has_value());
  EXPECT_EQ(truth["python"].get<std::string>().substr(0, 4), dump.python->substr(0, 4));
  for (const auto& want : truth["threads"]) {
    const pid_t native_id = want["native_id"].get<pid_t>();
    const model::ThreadDump* thread = nullptr;
    for (const auto& t : dump.threads) {
      if (t.tid == native_id || (t.tid != 0 && namespace_tid(dump.pid, t.tid) == native_id))
        thread = &t;
    }
    ASSERT_NE(thread, nullptr) << "no thread for " << want["name"] << " (native id " << native_id
                               << ")";
    SCOPED_TRACE(want["name"].get<std::string>());
    EXPECT_EQ(thread->py_thread_id, want["ident"].get<std::uint64_t>());
    EXPECT_EQ(thread->py_thread_name, want["name"].get<std::string>());
    EXPECT_TRUE(same_frames(want["frames"], thread->python_frames, qualnames));
    if (merged) {
      EXPECT_EQ(thread->merge, "ok") << testing::describe_stack(*thread);
      EXPECT_TRUE(same_frames(want["frames"], python_only(thread->frames), qualnames));
      // The merged view keeps the native leaf under the innermost Python frame.
      ASSERT_FALSE(thread->frames.empty());
      EXPECT_EQ(thread->frames.front().kind, model::Frame::Kind::kNative);
    }
  }
}

class PythonCapture : public ::testing::TestWithParam<PythonInterpreter> {};

TEST_P(PythonCapture, EveryFrameMatchesTheInterpretersOwnView) {
  PythonTarget target({}, GetParam().path);
  const auto dump = capture::capture_process(target.process.pid(), {});
  expect_matches_truth(dump, target.truth, /*merged=*/true);
  EXPECT_TRUE(testing::no_thread_stopped(target.process.pid()));
}

TEST_P(PythonCapture, AllThreadsModeReadsPythonWhileStopped) {
  PythonTarget target({}, GetParam().path);
  capture::CaptureOptions options;
  options.freeze.mode = native::StopMode::kAllThreads;
  const auto dump = capture::capture_process(target.process.pid(), options);
  expect_matches_truth(dump, target.truth, /*merged=*/true);
  EXPECT_TRUE(testing::no_thread_stopped(target.process.pid()));
}

TEST_P(PythonCapture, PythonOnlyModeStopsNothingAndMatches) {
  PythonTarget target({}, GetParam().path);
  capture::CaptureOptions options;
  options.stacks = capture::StackKinds::kPythonOnly;
  const auto dump = capture::capture_process(target.process.pid(), options);
  EXPECT_EQ(dump.max_paused.count(), 0);
  expect_matches_truth(dump, target.truth, /*merged=*/false);
}

TEST_P(PythonCapture, LocalsAreSimpleValuesAndSecretsAreMasked) {
  PythonTarget target({}, GetParam().path);
  capture::CaptureOptions options;
  options.locals = true;
  const auto dump = capture::capture_process(target.process.pid(), options);
  const model::Frame* method = nullptr;
  for (const auto& t : dump.threads) {
    for (const auto& f : t.python_frames) {
      if (f.function == "method") method = &f;
    }
  }
  ASSERT_NE(method, nullptr);
  std::map<std::string, std::string> locals(method->locals.begin(), method->locals.end());
  EXPECT_EQ(locals["group_name"], "'tp:0'");
  EXPECT_EQ(locals["api_token"], "<masked>");
  EXPECT_EQ(locals["sizes"], "[1, 2.5, None, True]");
  EXPECT_EQ(locals["payload"], "b'\\x00ab'");
  EXPECT_EQ(locals["self"], "<Inner>");
}

TEST_P(PythonCapture, GilHolderIsTheSpinningThread) {
  PythonTarget target({}, GetParam().path, {"--gil"});
  pid_t spinner = 0;
  for (const auto& t : target.truth["threads"]) {
    if (t["name"] == "spinner") spinner = t["native_id"].get<pid_t>();
  }
  int spinner_held = 0;
  for (int i = 0; i < 5; ++i) {
    const auto dump = capture::capture_process(target.process.pid(), {});
    int holders = 0;
    for (const auto& t : dump.threads) {
      holders += t.holds_gil ? 1 : 0;
      if (t.holds_gil && t.tid == spinner) ++spinner_held;
    }
    EXPECT_LE(holders, 1);
  }
  EXPECT_GE(spinner_held, 4);
}

// Interpreter state damaged on purpose through ctypes (corrupt_frames.py): a code object whose
// name points to unmapped memory, one whose file name is an int, one whose line table is
// garbage, and a thread that allocates and recurses without pause. 20 captures in each stop
// mode and with locals: no crash, no endless walk, a note naming the damaged frame, its callers
// still reported, and the healthy thread exact to the line.
TEST_P(PythonCapture, DamagedInterpreterStateGivesNotesAndTheRestOfTheProcess) {
  const std::string fixture = HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/corrupt_frames.py";
  testing::TargetProcess target({GetParam().path, fixture});
  target.wait_for_line("ready");
  int healthy_line = 0;
  {
    std::ifstream in(fixture);
    bool inside = false;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.rfind("def healthy_wait", 0) == 0) inside = true;
      if (inside && line.find("time.sleep(100000)") != std::string::npos) {
        healthy_line = n;
        break;
      }
    }
  }
  ASSERT_GT(healthy_line, 0);
  const auto by_name = [](const model::ProcessDump& dump, const std::string& name) {
    for (const auto& t : dump.threads) {
      if (t.py_thread_name == name) return &t;
    }
    return static_cast<const model::ThreadDump*>(nullptr);
  };
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE("capture " + std::to_string(i));
    capture::CaptureOptions options;
    options.locals = i % 2 == 1;
    if (i % 4 == 2) options.freeze.mode = native::StopMode::kAllThreads;
    if (i % 4 == 3) options.stacks = capture::StackKinds::kPythonOnly;
    const auto dump = capture::capture_process(target.pid(), options);
    for (const char* damaged : {"damaged_name_wait", "damaged_filename_wait"}) {
      const auto* thread = by_name(dump, damaged);
      ASSERT_NE(thread, nullptr) << damaged;
      std::string notes;
      for (const auto& note : thread->notes) notes += note + "; ";
      EXPECT_NE(notes.find("unreadable code object"), std::string::npos) << damaged << notes;
      ASSERT_GE(thread->python_frames.size(), 2u) << damaged;
      EXPECT_EQ(thread->python_frames[0].function.rfind("<unreadable code object 0x", 0), 0u);
      // Its callers are still there, read from the intact rest of the chain.
      EXPECT_EQ(thread->python_frames[1].function, "run") << describe(thread->python_frames);
      for (const auto& f : thread->python_frames) {
        EXPECT_TRUE(f.file.empty() || f.file.find(".py") != std::string::npos) << f.file;
      }
    }
    const auto* lines = by_name(dump, "damaged_lines_wait");
    ASSERT_NE(lines, nullptr);
    ASSERT_FALSE(lines->python_frames.empty());
    EXPECT_EQ(lines->python_frames[0].function, "damaged_lines_wait");
    EXPECT_EQ(lines->python_frames[0].file, fixture);
    const auto* healthy = by_name(dump, "healthy_wait");
    ASSERT_NE(healthy, nullptr);
    ASSERT_FALSE(healthy->python_frames.empty());
    EXPECT_EQ(healthy->python_frames[0].function, "healthy_wait");
    EXPECT_EQ(healthy->python_frames[0].file, fixture);
    EXPECT_EQ(healthy->python_frames[0].line, healthy_line);
    EXPECT_NE(by_name(dump, "churn_forever"), nullptr);
    EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
  }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonCapture,
                         ::testing::ValuesIn(testing::python_interpreters()),
                         [](const auto& param_info) { return param_info.param.label; });

// A target in its own PID namespace, read from outside: thread ids translated, files found.
TEST(PythonCaptureNamespaces, TargetInItsOwnPidNamespace) {
  const auto interpreters = testing::python_interpreters();
  ASSERT_FALSE(interpreters.empty());
  PythonTarget target({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc"},
                      interpreters.front().path);
  // unshare forks: the interpreter is its child.
  const auto children = read_file("/proc/" + std::to_string(target.process.pid()) + "/task/" +
                                  std::to_string(target.process.pid()) + "/children");
  ASSERT_TRUE(children.text);
  const pid_t python_pid = std::atoi(children.text->c_str());
  ASSERT_GT(python_pid, 0);
  // PythonTarget waited for unshare's threads to settle, not the interpreter's: its reporter
  // thread parks after printing "ready", and is read once it has.
  ASSERT_TRUE(testing::wait_until_settled(python_pid));
  EXPECT_EQ(target.truth["pid"], 1);  // pid 1 inside its namespace
  const auto dump = capture::capture_process(python_pid, {});
  EXPECT_TRUE(dump.notes.empty()) << dump.notes.front();
  expect_matches_truth(dump, target.truth, /*merged=*/true);
  for (const auto& t : dump.threads) EXPECT_NE(t.tid, 0);
}

TEST(PythonCaptureNotes, UnsupportedPythonGetsNativeStacksAndAClearNote) {
  const auto old = testing::old_python_interpreters();
  if (old.empty()) GTEST_SKIP() << "no CPython older than 3.10 on this machine";
  testing::TargetProcess target(
      {old.back().path, "-c", "import sys, time; print('ready', flush=True); time.sleep(600)"});
  target.wait_for_line("ready");
  const auto dump = capture::capture_process(target.pid(), {});
  ASSERT_EQ(dump.notes.size(), 1u);
  EXPECT_NE(dump.notes[0].find(" is not supported (known: 3.10 to 3.14): native stacks only"),
            std::string::npos)
      << dump.notes[0];
  EXPECT_FALSE(dump.python.has_value());
  ASSERT_EQ(dump.threads.size(), 1u);
  EXPECT_GE(testing::frame_index(dump.threads[0], "_PyEval_EvalFrameDefault"), 0);
}

TEST(PythonCaptureNotes, NonPythonProcessGetsNativeStacksAndNoPythonNote) {
  testing::TargetProcess target({NATIVE_TARGET});
  target.wait_for_line("ready");
  const auto dump = capture::capture_process(target.pid(), {});
  EXPECT_FALSE(dump.python.has_value());
  EXPECT_TRUE(dump.notes.empty());
  capture::CaptureOptions python_only;
  python_only.stacks = capture::StackKinds::kPythonOnly;
  const auto again = capture::capture_process(target.pid(), python_only);
  ASSERT_EQ(again.notes.size(), 1u);
  EXPECT_NE(again.notes[0].find("not a Python process"), std::string::npos) << again.notes[0];
}

}  // namespace
}  // namespace hangscope

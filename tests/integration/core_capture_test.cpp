// Core files of real processes: a gcore of every CPython 3.10+ on the machine, whose Python
// frames (and merged stacks) must equal a live capture taken just before, both made by the one
// assembly (capture_target.h), merged and Python-only; a kernel core of a process killed by
// SIGABRT, written to the test's own directory, read through `hangscope dump --core`; the
// .AsyncioDebug table of a library a process loaded, found in its gcore; and cores that are
// not cores, named.
#include "hangscope/capture/core_capture.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "command.h"
#include "hangscope/capture/process_capture.h"
#include "hangscope/common/error.h"
#include "hangscope/elf/core_file.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/python/asyncio_debug.h"
#include "python_targets.h"
#include "stack_assertions.h"
#include "target_process.h"

namespace hangscope {
namespace {

namespace fs = std::filesystem;
using testing::PythonInterpreter;

const std::string kTarget = HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/py_target.py";

// A directory of the test's own, removed with everything in it.
struct ScratchDir {
  fs::path path = fs::path(testing::temp_path("cores"));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

bool have_gcore() {
  return testing::run_command("command -v gcore >/dev/null").exit_code == 0;
}

// gcore's file for `pid` in `dir`, or "" when gcore failed.
std::string gcore(pid_t pid, const fs::path& dir) {
  const std::string prefix = (dir / "core").string();
  const auto result = testing::run_command("gcore -o " + prefix + " " + std::to_string(pid));
  const std::string path = prefix + "." + std::to_string(pid);
  return result.exit_code == 0 && fs::exists(path) ? path : "";
}

std::string describe(const model::FrameList& frames) {
  std::string out;
  for (const auto& f : frames) {
    out += "  " + f.qualname + " " + f.file + ":" + std::to_string(f.line) + "\n";
  }
  return out;
}

const model::ThreadDump* thread_of(const model::ProcessDump& dump, pid_t tid) {
  for (const auto& t : dump.threads) {
    if (t.tid == tid) return &t;
  }
  return nullptr;
}

// The functions of a stack, innermost first.
std::vector<std::string> functions(const model::FrameList& frames) {
  std::vector<std::string> out;
  for (const auto& f : frames) out.push_back(f.function);
  return out;
}

class CoreCapture : public ::testing::TestWithParam<PythonInterpreter> {};

TEST_P(CoreCapture, GcorePythonFramesEqualALiveCaptureJustBefore) {
  if (!have_gcore()) GTEST_SKIP() << "gcore (gdb) is not installed";
  ScratchDir dir;
  testing::TargetProcess target({GetParam().path, kTarget, "--truth", (dir.path / "t.json")});
  target.wait_for_line("ready");
  // The live capture and the core must see one moment: the reporter thread parked after
  // printing "ready" (it was once read at its print live and in Condition.wait in the core).
  ASSERT_TRUE(testing::wait_until_settled(target.pid()));
  const pid_t pid = target.pid();
  // Each through the one assembly: the live target stops and copies threads, the core's are
  // still; and Python-only, where nothing is stopped or unwound.
  capture::CaptureOptions live_options;
  const auto live_target = capture::open_process(pid, live_options);
  EXPECT_EQ(live_target->pid(), pid);
  const auto live = capture::assemble_dump(*live_target, live_options);
  capture::CaptureOptions live_python_only;
  live_python_only.stacks = capture::StackKinds::kPythonOnly;
  const auto live_python = capture::capture_process(pid, live_python_only);
  const std::string core_path = gcore(pid, dir.path);
  ASSERT_FALSE(core_path.empty()) << "gcore failed";
  EXPECT_TRUE(testing::no_thread_stopped(pid));
  target.kill_all();

  capture::CoreOptions core_options;
  const auto core_target = capture::open_core(core_path, core_options);
  EXPECT_EQ(core_target->pid(), pid);
  EXPECT_EQ(core_target->command(), live_target->command());
  const auto core = capture::assemble_dump(*core_target, core_options);
  EXPECT_EQ(core.pid, live.pid);
  EXPECT_EQ(core.command, live.command);
  EXPECT_EQ(core.python, live.python);
  ASSERT_EQ(core.threads.size(), live.threads.size());
  int python_threads = 0;
  for (const auto& want : live.threads) {
    SCOPED_TRACE("thread " + std::to_string(want.tid));
    const auto* got = thread_of(core, want.tid);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->state, '?');  // a core records no state: never guessed
    EXPECT_EQ(got->py_thread_id, want.py_thread_id);
    EXPECT_EQ(got->py_thread_name, want.py_thread_name);
    EXPECT_EQ(got->python_frames, want.python_frames) << "live:\n"
                                                      << describe(want.python_frames) << "core:\n"
                                                      << describe(got->python_frames);
    if (!want.python_frames.empty()) {
      ++python_threads;
      EXPECT_EQ(got->merge, "ok") << testing::describe_stack(*got);
      ASSERT_FALSE(got->frames.empty());
      EXPECT_EQ(got->frames.front().kind, model::Frame::Kind::kNative);  // the native leaf
      // The same unwinding, symbols and merge over the same registers and bytes.
      EXPECT_EQ(functions(got->frames), functions(want.frames))
          << "live:\n"
          << testing::describe_stack(want) << "core:\n"
          << testing::describe_stack(*got);
    }
  }
  EXPECT_GE(python_threads, 5);

  capture::CoreOptions core_python_only;
  core_python_only.stacks = capture::StackKinds::kPythonOnly;
  const auto core_python = capture::capture_core(core_path, core_python_only);
  ASSERT_EQ(core_python.threads.size(), live_python.threads.size());
  for (const auto& want : live_python.threads) {
    SCOPED_TRACE("Python-only, thread " + std::to_string(want.tid));
    const auto* got = thread_of(core_python, want.tid);
    ASSERT_NE(got, nullptr);
    EXPECT_TRUE(got->native_frames.empty());
    EXPECT_TRUE(want.native_frames.empty());
    EXPECT_EQ(got->python_frames, want.python_frames) << "live:\n"
                                                      << describe(want.python_frames) << "core:\n"
                                                      << describe(got->python_frames);
    EXPECT_EQ(got->frames, got->python_frames);
    const auto* merged = thread_of(live, want.tid);
    ASSERT_NE(merged, nullptr);
    EXPECT_EQ(want.python_frames, merged->python_frames);  // parked: as the merged capture read
  }
  const bool says_unknown = std::any_of(core.notes.begin(), core.notes.end(), [](const auto& n) {
    return n.find("no thread state") != std::string::npos && n.find("gcore") != std::string::npos;
  });
  EXPECT_TRUE(says_unknown);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, CoreCapture,
                         ::testing::ValuesIn(testing::python_interpreters()),
                         [](const auto& param_info) { return param_info.param.label; });

// Where the kernel writes a core: into the process's working directory when core_pattern is a
// relative name; nullopt when it is a pipe (systemd-coredump, apport) or an absolute path.
std::optional<std::string> relative_core_pattern() {
  std::ifstream in("/proc/sys/kernel/core_pattern");
  std::string pattern;
  std::getline(in, pattern);
  if (pattern.empty() || pattern[0] == '|' || pattern[0] == '/') return std::nullopt;
  return pattern;
}

TEST(KernelCore, SigabrtCoreInTheTestsDirectoryReadsLikeALiveDump) {
  const auto pattern = relative_core_pattern();
  if (!pattern)
    GTEST_SKIP() << "core_pattern is a pipe or an absolute path: cores do not land here";
  const auto interpreters = testing::python_interpreters();
  ASSERT_FALSE(interpreters.empty());
  ScratchDir dir;
  const std::string python = interpreters.front().path;
  const std::string script = (dir.path / "abort_me.py").string();
  {
    std::ofstream out(script);
    out << "import os, sys, threading\n"
           "def hold(event):\n"
           "    event.wait()\n"
           "def abort_here():\n"
           "    os.abort()\n"
           "threading.Thread(target=hold, args=(threading.Event(),), name='holder').start()\n"
           "abort_here()\n";
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child's own core limit and working directory; nothing global changes.
    const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    ::setrlimit(RLIMIT_CORE, &unlimited);
    if (::chdir(dir.path.c_str()) != 0) ::_exit(127);
    ::execl(python.c_str(), python.c_str(), script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(WTERMSIG(status), SIGABRT);
  if (!WCOREDUMP(status)) GTEST_SKIP() << "the kernel wrote no core (limits or filesystem)";
  std::string core_path;
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    if (entry.path().filename().string().rfind("core", 0) == 0) core_path = entry.path();
  }
  ASSERT_FALSE(core_path.empty()) << "no core file in " << dir.path;

  const auto result =
      testing::run_command(std::string(HANGSCOPE_BINARY) + " dump --core " + core_path);
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("written by the kernel"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("ended by SIGABRT"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("? (unknown state)"), std::string::npos) << result.out;
  // The aborting call and the thread that waits, with the script's lines.
  EXPECT_NE(result.out.find("[py] abort_here (" + script + ":5)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("[py] hold (" + script + ":3)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("abort"), std::string::npos);

  const auto json =
      testing::run_command(std::string(HANGSCOPE_BINARY) + " dump --json --core " + core_path);
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_NE(json.out.find("\"state\": \"?\""), std::string::npos);
}

// 3.14's asyncio offsets from a core (no 3.14 here: a stand-in library with the section,
// tests/fixtures/asyncio_debug_fixture.c): the table the process changed after loading it is
// read from the core's copy of the page, at the library's load address.
TEST(AsyncioDebugInACore, TheTableIsReadFromTheCoresMemory) {
  if (!have_gcore()) GTEST_SKIP() << "gcore (gdb) is not installed";
  ScratchDir dir;
  const std::string library = ASYNCIO_DEBUG_FIXTURE;
  testing::TargetProcess target(
      {"/usr/bin/python3", "-c",
       "import ctypes, sys, time\n"
       "table = (ctypes.c_uint64 * 13).in_dll(ctypes.CDLL(sys.argv[1]), '_AsyncioDebug')\n"
       "table[12] = 888\n"
       "print('ready', flush=True)\n"
       "time.sleep(120)\n",
       library});
  target.wait_for_line("ready");
  const std::string core_path = gcore(target.pid(), dir.path);
  target.kill_all();
  ASSERT_FALSE(core_path.empty()) << "gcore failed";
  const auto core = elf::CoreFile::open(core_path);
  ASSERT_TRUE(core);
  elf::ProcessImage image(std::make_shared<elf::SysrootFiles>("", "", ""), core->maps());
  const auto table = python::read_asyncio_debug(image, *core);
  ASSERT_EQ(table.bytes.size(), python::kAsyncioDebugSize) << table.problem;
  EXPECT_EQ(table.module_path, library);
  std::uint64_t values[13];
  std::memcpy(values, table.bytes.data(), sizeof values);
  EXPECT_EQ(std::vector<std::uint64_t>(values, values + 13),
            (std::vector<std::uint64_t>{184, 152, 112, 124, 125, 144, 168, 8192, 7800, 896, 864,
                                        872, 888}));
}

TEST(CoreInput, FilesThatAreNoCoreAreNamedWithTheReason) {
  ScratchDir dir;
  const std::string text = (dir.path / "notes.txt").string();
  std::ofstream(text) << "not a core\n";
  const auto not_elf = testing::run_command(std::string(HANGSCOPE_BINARY) + " dump --core " + text);
  EXPECT_EQ(not_elf.exit_code, 1);
  EXPECT_NE(not_elf.err.find(text + ": not an ELF file"), std::string::npos) << not_elf.err;

  const auto executable = testing::run_command(std::string(HANGSCOPE_BINARY) + " dump --core " +
                                               std::string(HANGSCOPE_BINARY));
  EXPECT_EQ(executable.exit_code, 1);
  EXPECT_NE(executable.err.find("an ELF file but not a core"), std::string::npos) << executable.err;

  const auto missing = testing::run_command(std::string(HANGSCOPE_BINARY) + " dump --core " +
                                            (dir.path / "absent").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("absent"), std::string::npos) << missing.err;

  const auto both =
      testing::run_command(std::string(HANGSCOPE_BINARY) + " dump --pid 1 --core " + text);
  EXPECT_EQ(both.exit_code, 2) << both.err;
  const auto neither = testing::run_command(std::string(HANGSCOPE_BINARY) + " dump");
  EXPECT_EQ(neither.exit_code, 2) << neither.err;
  EXPECT_NE(neither.err.find("--core FILE"), std::string::npos) << neither.err;
}

}  // namespace
}  // namespace hangscope

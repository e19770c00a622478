// Captures a real process built like production code and checks every thread's frames.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "hangscope/capture/process_capture.h"
#include "hangscope/common/diagnostic.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/native/freezer.h"
#include "hangscope/native/unwinder.h"
#include "hangscope/proc/maps.h"
#include "hangscope/proc/process_fs.h"
#include "stack_assertions.h"
#include "target_process.h"

namespace hangscope {
namespace {

using testing::find_thread;
using testing::has_frames_in_order;
using testing::TargetProcess;

// The spinner's progress counter, shared with the target through a file.
class SharedCounter {
 public:
  SharedCounter() : path_(testing::temp_path("counter")) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, 4096), 0);
    page_ = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
  }
  ~SharedCounter() {
    ::munmap(page_, 4096);
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  unsigned long value() const {
    return static_cast<const std::atomic<unsigned long>*>(page_)->load();
  }
  // True when the target's spinner thread advances the counter within the timeout.
  bool advances() const {
    const unsigned long before = value();
    return testing::eventually([&] { return value() > before; });
  }

 private:
  std::string path_;
  void* page_ = nullptr;
};

struct NativeTarget {
  SharedCounter counter;
  TargetProcess process;
  explicit NativeTarget(std::vector<std::string> extra = {})
      : process([&] {
          std::vector<std::string> argv{NATIVE_TARGET, "--counter", counter.path()};
          argv.insert(argv.end(), extra.begin(), extra.end());
          return argv;
        }()) {
    process.wait_for_line("ready");
    // "ready" is written by the main thread just before it blocks in join(): wait until it has.
    const std::string wchan_path = "/proc/" + std::to_string(process.pid()) + "/wchan";
    EXPECT_TRUE(testing::eventually([&] {
      const auto wchan = read_file(wchan_path);
      return testing::thread_states(process.pid())[process.pid()] == 'S' && wchan.text &&
             wchan.text->find("futex") != std::string::npos;
    }));
  }
};

capture::CaptureOptions options_for(native::StopMode mode) {
  capture::CaptureOptions options;
  options.freeze.mode = mode;
  return options;
}

void expect_known_stacks(const model::ProcessDump& dump) {
  const auto* cv = find_thread(dump, "cv_waiter");
  ASSERT_NE(cv, nullptr);
  EXPECT_EQ(cv->state, 'S');
  // libstdc++'s condition_variable::wait tail-calls pthread_cond_wait: no frame of its own.
  EXPECT_TRUE(has_frames_in_order(
      *cv, {"pthread_cond_wait", "wait_on_condition()", "cv_middle()", "cv_outer()"}));
  const auto* poller = find_thread(dump, "poller");
  ASSERT_NE(poller, nullptr);
  EXPECT_TRUE(has_frames_in_order(*poller, {"poll", "poll_forever", "poll_outer"}));
  const auto* sleeper = find_thread(dump, "sleeper");
  ASSERT_NE(sleeper, nullptr);
  EXPECT_TRUE(has_frames_in_order(*sleeper, {"nanosleep", "sleep_forever", "sleep_outer"}));
  const auto* spinner = find_thread(dump, "spinner");
  ASSERT_NE(spinner, nullptr);
  EXPECT_EQ(spinner->state, 'R');
  // The busy loop's inlined step is part of spin_forever's frame.
  EXPECT_TRUE(has_frames_in_order(*spinner, {"spin_forever", "spin_outer"}));
  // Every thread unwinds down to the thread entry.
  for (const auto* t : {cv, poller, sleeper, spinner}) {
    EXPECT_TRUE(has_frames_in_order(*t, {"start_thread", "clone"})) << t->name;
  }
  const auto* main_thread = find_thread(dump, "native_target");
  ASSERT_NE(main_thread, nullptr);
  EXPECT_EQ(main_thread->tid, dump.pid);
  EXPECT_TRUE(
      has_frames_in_order(*main_thread, {"std::thread::join", "main_wait", "main", "_start"}));
}

TEST(NativeCapture, EachThreadModeNamesEveryFrameInOrder) {
  NativeTarget target;
  const auto dump =
      capture::capture_process(target.process.pid(), options_for(native::StopMode::kEachThread));
  EXPECT_EQ(dump.pid, target.process.pid());
  EXPECT_EQ(dump.command, "native_target");
  EXPECT_EQ(dump.threads.size(), 5u);
  expect_known_stacks(dump);
  EXPECT_TRUE(testing::no_thread_stopped(target.process.pid()));
  EXPECT_TRUE(target.counter.advances());
}

TEST(NativeCapture, AllThreadsModeNamesEveryFrameInOrder) {
  NativeTarget target;
  const auto dump =
      capture::capture_process(target.process.pid(), options_for(native::StopMode::kAllThreads));
  expect_known_stacks(dump);
  EXPECT_TRUE(testing::no_thread_stopped(target.process.pid()));
  EXPECT_TRUE(target.counter.advances());
}

TEST(NativeCapture, ModulesAndOffsetsAreReported) {
  NativeTarget target;
  const auto dump = capture::capture_process(target.process.pid(), {});
  const auto* cv = find_thread(dump, "cv_waiter");
  ASSERT_NE(cv, nullptr);
  const int at = testing::frame_index(*cv, "wait_on_condition");
  ASSERT_GE(at, 0);
  const auto& frame = cv->frames[static_cast<std::size_t>(at)];
  EXPECT_EQ(frame.module, NATIVE_TARGET);
  EXPECT_GT(frame.offset, 0u);
  EXPECT_LT(frame.offset, 512u);  // a return address inside a small function
  EXPECT_GT(frame.address, frame.module_offset);
  const int libc = testing::frame_index(*cv, "pthread_cond_wait");
  ASSERT_GE(libc, 0);
  EXPECT_NE(cv->frames[static_cast<std::size_t>(libc)].module.find("libc.so.6"), std::string::npos);
}

TEST(NativeCapture, ManyThreadsAreAllCapturedAndReleased) {
  NativeTarget target({"--extra-threads", "60"});
  const auto dump =
      capture::capture_process(target.process.pid(), options_for(native::StopMode::kAllThreads));
  EXPECT_EQ(dump.threads.size(), 65u);
  int idle = 0;
  for (const auto& t : dump.threads) {
    if (testing::frame_index(t, "idle_forever") >= 0) ++idle;
    EXPECT_TRUE(t.notes.empty()) << testing::describe_stack(t);
  }
  EXPECT_EQ(idle, 60);
  EXPECT_GT(dump.max_paused.count(), 0);
  EXPECT_TRUE(testing::no_thread_stopped(target.process.pid()));
  EXPECT_TRUE(target.counter.advances());
}

// The walk's end is typed: every thread of the target unwinds to its outermost frame
// (kComplete), and the same copy cut at two frames says kFrameLimit.
TEST(NativeCapture, WalkEndsSayWhyTheWalkEnded) {
  NativeTarget target;
  const pid_t pid = target.process.pid();
  const proc::ProcessFs fs(pid);
  int error = 0;
  auto maps = proc::read_memory_map(pid, &error);
  ASSERT_TRUE(maps) << error;
  elf::ProcessImage image(fs, std::move(*maps));
  memory::ProcessMemory live(pid);
  const auto frozen = native::freeze_and_copy(fs, image.maps(), live,
                                              options_for(native::StopMode::kAllThreads).freeze);
  EXPECT_TRUE(testing::no_thread_stopped(pid));
  native::Unwinder unwinder(image, &live);
  std::size_t walked = 0;
  for (const auto& copy : frozen.threads) {
    if (!copy.copied) continue;
    const auto whole = unwinder.unwind(copy, 2048);
    EXPECT_EQ(whole.end, WalkEnd::kComplete) << copy.tid << ": " << whole.stop_reason;
    EXPECT_TRUE(whole.stop_reason.empty()) << whole.stop_reason;
    ASSERT_GT(whole.frames.size(), 2u) << copy.tid;
    const auto cut = unwinder.unwind(copy, 2);
    EXPECT_EQ(cut.end, WalkEnd::kFrameLimit) << copy.tid << ": " << cut.stop_reason;
    EXPECT_EQ(cut.frames.size(), 2u);
    EXPECT_FALSE(cut.stop_reason.empty());
    ++walked;
  }
  EXPECT_EQ(walked, 5u);
}

}  // namespace
}  // namespace hangscope

// assemble_dump over a target that is neither a live process nor a core: the one assembly asks a
// target only through CaptureTarget, in a fixed order (its notes, its threads, the facts it
// alone has), and describes every thread from its copy.
#include "hangscope/capture/capture_target.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hangscope/common/error.h"
#include "hangscope/elf/module_files.h"

namespace hangscope {
namespace {

// A process with no mapping and no readable byte, whose threads are what the test says; every
// call the assembly makes is recorded.
class FakeTarget final : public capture::CaptureTarget {
 public:
  explicit FakeTarget(std::vector<native::ThreadCopy> threads)
      : image_(std::make_shared<elf::SysrootFiles>("", "", ""), proc::MemoryMap{}),
        threads_(std::move(threads)) {}

  pid_t pid() const override { return 4242; }
  std::string command() const override { return "fake"; }
  std::string label() const override { return "fake 4242"; }
  elf::ProcessImage& image() override { return image_; }
  memory::MemoryReader& memory() override { return memory_; }
  std::vector<std::string> notes() const override { return {"where it comes from"}; }

  capture::ThreadCopies copy_threads(const capture::CopyRequest& request) override {
    calls.push_back(std::string("copy_threads stop=") + (request.stop ? "1" : "0") +
                    " instant=" + (request.at_one_instant ? "1" : "0"));
    if (threads_.empty()) throw Error("fake 4242 has no threads");
    capture::ThreadCopies copies;
    copies.threads = threads_;
    copies.notes = {"about the copy"};
    copies.max_paused = std::chrono::milliseconds(3);
    return copies;
  }

  bool holds_one_instant() const override { return false; }  // stops threads one by one

  void add_thread_facts(const native::ThreadCopy& copy, model::ThreadDump& thread) override {
    calls.push_back("add_thread_facts " + std::to_string(copy.tid));
    thread.notes.push_back("the target's fact of " + std::to_string(copy.tid));
  }

  void add_process_facts(const capture::ReadOptions&, model::ProcessDump& dump) override {
    calls.push_back("add_process_facts with " + std::to_string(dump.threads.size()) + " threads");
    dump.notes.push_back("the target's fact of the process");
  }

  std::vector<std::string> calls;

 private:
  // Reads nothing: a process with no memory to read.
  class NoMemory final : public memory::MemoryReader {
   public:
    std::size_t read(std::uint64_t, void*, std::size_t) override { return 0; }
  };
  elf::ProcessImage image_;
  NoMemory memory_;
  std::vector<native::ThreadCopy> threads_;
};

std::vector<native::ThreadCopy> two_threads() {
  native::ThreadCopy stuck;  // would not stop: state D, not copied
  stuck.tid = 11;
  stuck.stat.comm = "stuck";
  stuck.stat.state = 'D';
  stuck.error = "thread 11 did not stop within 100 ms";
  native::ThreadCopy waiting;  // listed, its /proc facts read
  waiting.tid = 12;
  waiting.stat.comm = "waiting";
  waiting.stat.state = 'S';
  waiting.stat.utime_ticks = 7;
  waiting.stat.stime_ticks = 2;
  waiting.wchan = "futex_wait_queue";
  waiting.context_switches = 5;
  waiting.paused = std::chrono::microseconds(40);
  return {stuck, waiting};
}

TEST(CaptureTarget, TheAssemblyAsksTheTargetInOneOrderAndDescribesThreadsFromTheirCopies) {
  FakeTarget target(two_threads());
  const auto dump = capture::assemble_dump(target, {});
  EXPECT_EQ(dump.pid, 4242);
  EXPECT_EQ(dump.command, "fake");
  EXPECT_FALSE(dump.python);  // no interpreter: a native process, and no note for it
  EXPECT_EQ(dump.notes, (std::vector<std::string>{"where it comes from", "about the copy",
                                                  "the target's fact of the process"}));
  EXPECT_EQ(dump.max_paused, std::chrono::milliseconds(3));
  EXPECT_EQ(target.calls,
            (std::vector<std::string>{"copy_threads stop=1 instant=0", "add_thread_facts 11",
                                      "add_thread_facts 12", "add_process_facts with 2 threads"}));
  ASSERT_EQ(dump.threads.size(), 2u);
  const auto& stuck = dump.threads[0];
  EXPECT_EQ(stuck.tid, 11);
  EXPECT_EQ(stuck.name, "stuck");
  EXPECT_EQ(stuck.state, 'D');
  EXPECT_TRUE(stuck.native_frames.empty());  // not copied: nothing to unwind
  EXPECT_EQ(stuck.notes, (std::vector<std::string>{"thread 11 did not stop within 100 ms",
                                                   "the target's fact of 11"}));
  const auto& waiting = dump.threads[1];
  EXPECT_EQ(waiting.state, 'S');
  EXPECT_EQ(waiting.wchan, "futex_wait_queue");
  EXPECT_EQ(waiting.utime_ticks, 7u);
  EXPECT_EQ(waiting.stime_ticks, 2u);
  EXPECT_EQ(waiting.context_switches, 5u);
  EXPECT_EQ(waiting.paused, std::chrono::microseconds(40));
  EXPECT_EQ(waiting.notes, (std::vector<std::string>{"the target's fact of 12"}));
  EXPECT_GT(dump.capture_time, std::chrono::nanoseconds(0));
  EXPECT_LE(dump.capture_time, std::chrono::steady_clock::now() - target.began());
}

TEST(CaptureTarget, PythonOnlyAsksForNoStopAndSaysThereIsNoInterpreter) {
  FakeTarget target(two_threads());
  capture::ReadOptions options;
  options.stacks = capture::StackKinds::kPythonOnly;
  const auto dump = capture::assemble_dump(target, options);
  ASSERT_FALSE(target.calls.empty());
  EXPECT_EQ(target.calls.front(), "copy_threads stop=0 instant=0");
  ASSERT_EQ(dump.notes.size(), 4u);
  EXPECT_EQ(dump.notes[0], "where it comes from");
  EXPECT_NE(dump.notes[1].find("not a Python process"), std::string::npos) << dump.notes[1];
  EXPECT_EQ(dump.notes[2], "about the copy");
}

TEST(CaptureTarget, ATargetWithoutThreadsIsNoDump) {
  FakeTarget target({});
  EXPECT_THROW(capture::assemble_dump(target, {}), Error);
}

}  // namespace
}  // namespace hangscope

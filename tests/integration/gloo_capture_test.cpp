// A real torch.distributed gloo job hung in a barrier (Debian's python3-torch): the waiting
// rank's capture shows gloo's receive wait under gloo::barrier; the diverged rank's does not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "hangscope/capture/process_capture.h"
#include "stack_assertions.h"
#include "target_process.h"

namespace hangscope {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

pid_t pid_from_line(const std::string& line) {  // "rank <r> pid <pid> <what>"
  std::istringstream in(line);
  std::string word;
  int rank = 0;
  pid_t pid = 0;
  in >> word >> rank >> word >> pid;
  return pid;
}

const capture::ThreadDump* thread_with(const capture::ProcessDump& dump, const std::string& fn) {
  for (const auto& t : dump.threads) {
    if (testing::frame_index(t, fn) >= 0) return &t;
  }
  return nullptr;
}

TEST(GlooCapture, WaitingRankShowsGlooBarrierAndDivergedRankDoesNot) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing (tools/install-deps.sh)";
  testing::TargetProcess job({kPython, HANGSCOPE_SOURCE_DIR "/tools/repro/gloo_barrier_hang.py",
                              "--world-size", "2", "--diverged-rank", "1", "--timeout", "600"});
  const pid_t waiting = pid_from_line(job.wait_for_line("rank 0 pid", std::chrono::seconds(120)));
  const pid_t diverged = pid_from_line(job.wait_for_line("rank 1 pid", std::chrono::seconds(120)));
  ASSERT_GT(waiting, 0);
  ASSERT_GT(diverged, 0);

  // The rank prints before it calls barrier(): capture until the barrier is reached.
  capture::ProcessDump dump;
  const capture::ThreadDump* worker = nullptr;
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

}  // namespace
}  // namespace hangscope

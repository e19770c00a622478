// A real torch.distributed gloo job hung in a barrier (Debian's python3-torch): the waiting
// rank's capture shows gloo's receive wait under gloo::barrier; the diverged rank's does not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "hangscope/capture/process_capture.h"
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
  EXPECT_LT(wait_at, barrier - main_thread.frames.vector().data());
  EXPECT_LT(barrier, call_site);
  EXPECT_NE(barrier->file.find("torch/distributed/distributed_c10d.py"), std::string::npos);
  EXPECT_EQ(call_site->file, kScript);
  EXPECT_EQ(call_site->line, script_line("dist.barrier()"));
  EXPECT_EQ(local(*barrier, "group"), "None");                    // the default group
  EXPECT_EQ(local(*barrier, "default_pg"), "<process group 0>");  // known from the registry

  const auto other = capture::capture_process(diverged, options);
  const auto& other_main = other.threads.front();
  const auto* load = python_frame(other_main, "load_weights");
  ASSERT_NE(load, nullptr) << testing::describe_stack(other_main);
  EXPECT_EQ(local(*load, "key"), "'weights/1/ready'");
  EXPECT_EQ(load->line, script_line("store.wait([key], datetime.timedelta(hours=1))"));
}

}  // namespace
}  // namespace hangscope

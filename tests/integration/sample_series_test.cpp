// The sampling loop with probes between samples (capture/sample_series.h) on real interpreters:
// a thread that steps in and out of a wait is seen outside it by some probe, a thread stuck in
// its wait never is, on every CPython 3.10+ of the machine.
#include "hangscope/capture/sample_series.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "python_targets.h"
#include "target_process.h"

namespace hangscope {
namespace {

const std::string kStepLoop = HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/step_loop.py";

class SampleSeries : public ::testing::TestWithParam<testing::PythonInterpreter> {};

const model::ThreadDump* thread_named(const model::NodeSnapshot& sample, pid_t pid,
                                      const std::string& name) {
  for (const auto& p : sample.processes) {
    if (p.pid != pid || !p.dump) continue;
    for (const auto& t : p.dump->threads) {
      if (t.py_thread_name == name) return &t;
    }
  }
  return nullptr;
}

TEST_P(SampleSeries, ProbesSeeAStepLoopLeaveItsWaitAndAStuckThreadNever) {
  testing::TargetProcess target({GetParam().path, kStepLoop});
  target.wait_for_line("ready");
  capture::NodeCaptureOptions options;
  options.selection.pids = {target.pid()};
  capture::SeriesPlan plan;
  plan.samples = 3;
  // diagnose's default interval: a sanitizer build on a loaded machine reads a process in
  // milliseconds, and probes take at most half the interval.
  plan.interval = std::chrono::seconds(1);
  capture::SeriesHooks hooks;
  hooks.wait_until = capture::sleep_until_unix;
  const auto series = capture::capture_series(options, plan, hooks);
  ASSERT_TRUE(series.has_value());
  ASSERT_EQ(series->size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*series)[i].sample_index, i);
  EXPECT_FALSE(thread_named(series->front(), target.pid(), "stuck")->probes.has_value())
      << "the first sample has no probes before it";
  std::uint32_t stepper_outside = 0;  // over the series: a step loop's excursions are short
  for (std::size_t i = 1; i < series->size(); ++i) {
    SCOPED_TRACE("sample " + std::to_string(i));
    const auto* before_stuck = thread_named((*series)[i - 1], target.pid(), "stuck");
    const auto* stuck = thread_named((*series)[i], target.pid(), "stuck");
    const auto* before_stepper = thread_named((*series)[i - 1], target.pid(), "stepper");
    const auto* stepper = thread_named((*series)[i], target.pid(), "stepper");
    ASSERT_TRUE(stuck && before_stuck && stepper && before_stepper);
    ASSERT_TRUE(stuck->probes.has_value());
    ASSERT_TRUE(stepper->probes.has_value());
    EXPECT_GE(stuck->probes->taken, 4u);
    EXPECT_GE(stepper->probes->taken, 2u);  // a read of it elsewhere counts when a second agrees
    // The innermost Python frame at the sample before: the stuck thread never left it (nor any
    // frame outside it); the stepper did (between wait_for_peers and host_work).
    ASSERT_FALSE(before_stuck->python_frames.empty());
    EXPECT_EQ(before_stuck->python_frames.front().function, "wait");  // threading.Event.wait
    const std::size_t stuck_depth = before_stuck->python_frames.size() - 1;
    EXPECT_EQ(stuck->probes->outside(stuck_depth), 0u);
    ASSERT_FALSE(before_stepper->python_frames.empty());
    const std::size_t stepper_depth = before_stepper->python_frames.size() - 1;
    stepper_outside += stepper->probes->outside(stepper_depth);
    // It never left step_forever, the loop (depth 0: Thread._bootstrap … step_forever).
    std::size_t loop_depth = 0;
    for (std::size_t f = 0; f < before_stepper->python_frames.size(); ++f) {
      if (before_stepper->python_frames[f].function == "step_forever") {
        loop_depth = before_stepper->python_frames.size() - 1 - f;
      }
    }
    ASSERT_GT(loop_depth, 0u);
    EXPECT_EQ(stepper->probes->outside(loop_depth), 0u);
  }
  // Seen outside the frame it stood in at the sample before (wait_for_peers or host_work).
  EXPECT_GT(stepper_outside, 0u);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, SampleSeries,
                         ::testing::ValuesIn(testing::python_interpreters()),
                         [](const auto& param_info) { return param_info.param.label; });

}  // namespace
}  // namespace hangscope

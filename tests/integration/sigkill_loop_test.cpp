// Slow tier: hangscope SIGKILLed 200 times at random points of captures of a 1,000-thread target.
#include "sigkill_loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <iostream>

#include "target_process.h"

namespace hangscope {
namespace {

TEST(SlowFaults, TwoHundredSigkillsLeaveNoThreadStopped) {
  const std::string counter = testing::temp_path("counter");
  testing::TargetProcess target({NATIVE_TARGET, "--extra-threads", "1000", "--counter", counter});
  target.wait_for_line("ready", std::chrono::seconds(120));
  const auto each = testing::sigkill_loop(target.pid(), 100, 50000, "each", 7, counter);
  const auto all = testing::sigkill_loop(target.pid(), 100, 50000, "all", 11, counter);
  EXPECT_EQ(each.iterations + all.iterations, 200);
  EXPECT_EQ(each.left_stopped + all.left_stopped, 0);
  EXPECT_EQ(each.stalled + all.stalled, 0);  // the target kept counting after every kill
  EXPECT_GT(each.killed_mid_capture + all.killed_mid_capture, 100);
  RecordProperty("killed_mid_capture", each.killed_mid_capture + all.killed_mid_capture);
  std::cout << "sigkill loop: " << each.iterations + all.iterations << " SIGKILLs of hangscope, "
            << each.killed_mid_capture + all.killed_mid_capture << " mid-capture, "
            << each.left_stopped + all.left_stopped << " left a thread stopped, "
            << each.stalled + all.stalled << " stalled the target\n";
  EXPECT_TRUE(testing::no_thread_stopped(target.pid()));
  ::unlink(counter.c_str());
}

}  // namespace
}  // namespace hangscope

#include "hangscope/proc/task_stat.h"

#include <gtest/gtest.h>

#include "hangscope/model/process_dump.h"

namespace hangscope::proc {
namespace {

TEST(TaskStat, ParsesCommWithSpacesAndParentheses) {
  const auto stat = parse_task_stat(
      "4242 (VLLM::Worker (TP 1)) S 4200 4242 4200 0 -1 4194624 5 0 0 0 17 23 0 0 20 0 6 0 "
      "123456 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n");
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->tid, 4242);
  EXPECT_EQ(stat->comm, "VLLM::Worker (TP 1)");
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->ppid, 4200);
  EXPECT_EQ(stat->flags, 4194624u);
  EXPECT_EQ(stat->utime_ticks, 17u);
  EXPECT_EQ(stat->stime_ticks, 23u);
  EXPECT_EQ(stat->start_time_ticks, 123456u);
}

TEST(TaskStat, KernelThreadFlag) {
  const auto stat = parse_task_stat(
      "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 "
      "0 0 0 0 0 2147483647 0 0 0 0 0 0 0 0 0 0 0\n");
  ASSERT_TRUE(stat);
  EXPECT_TRUE(stat->flags & kPfKthread);
}

TEST(TaskStat, RejectsGarbage) {
  EXPECT_FALSE(parse_task_stat(""));
  EXPECT_FALSE(parse_task_stat("12 (x"));
  EXPECT_FALSE(parse_task_stat("x (comm) S 1"));
  EXPECT_FALSE(parse_task_stat("12 (comm) S 1 2 3"));  // truncated
  EXPECT_FALSE(parse_task_stat("12 (comm) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"));
}

TEST(TaskStatus, ReadsTracerAndNamespacePids) {
  const auto status = parse_task_status(
      "Name:\tpython3\nState:\tS (sleeping)\nTgid:\t900\nNgid:\t0\nPid:\t901\nPPid:\t1\n"
      "TracerPid:\t77\nNSpid:\t901\t12\nNSpgid:\t900\t11\n");
  EXPECT_EQ(status.tracer_pid, 77);
  EXPECT_EQ(status.ns_pids, (std::vector<pid_t>{901, 12}));
  EXPECT_EQ(parse_task_status("garbage without colons").tracer_pid, 0);
}

TEST(TaskStat, DescribesStates) {
  EXPECT_EQ(model::describe_state('D'), "uninterruptible sleep");
  EXPECT_EQ(model::describe_state('t'), "tracing stop");
  EXPECT_EQ(model::describe_state('?'), "unknown state");
}

}  // namespace
}  // namespace hangscope::proc

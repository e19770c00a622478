// Parsers for /proc/PID/task/TID/{stat,status}: state letter, name, flags, CPU times, tracer,
// NSpid.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hangscope::proc {

// The fields of /proc/.../stat that hangscope uses.
struct TaskStat {
  pid_t tid = 0;
  std::string comm;  // between the first '(' and the last ')'; may hold spaces and ')'
  char state = '?';  // R S D T t Z X I ...
  pid_t ppid = 0;
  std::uint32_t flags = 0;  // PF_* flags (PF_KTHREAD marks kernel threads)
  std::uint64_t utime_ticks = 0;
  std::uint64_t stime_ticks = 0;
  std::uint64_t start_time_ticks = 0;
};

inline constexpr std::uint32_t kPfKthread = 0x00200000;

// Parses one stat line; nullopt when the text is not a stat line.
std::optional<TaskStat> parse_task_stat(std::string_view text);

// The fields of /proc/.../status that hangscope uses.
struct TaskStatus {
  pid_t tracer_pid = 0;        // TracerPid: another process tracing this task, 0 when none
  std::vector<pid_t> ns_pids;  // NSpid: ids from the host namespace inward
  std::uint64_t voluntary_switches = 0;  // voluntary_ctxt_switches: times it blocked
  std::uint64_t involuntary_switches = 0;
  // Uid: the effective uid (the second of real, effective, saved, file system); nullopt when the
  // line is missing. The owner a file the process wrote for root to read must have.
  std::optional<uid_t> effective_uid;
};

TaskStatus parse_task_status(std::string_view text);

}  // namespace hangscope::proc

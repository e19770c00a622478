// One node's snapshot: discovers the rank processes (and other Python processes), identifies
// them, and captures each; processes are captured one after another, each under its deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/capture/process_capture.h"
#include "hangscope/capture/process_dump.h"
#include "hangscope/collectives/flight_recorder.h"
#include "hangscope/identity/logs.h"
#include "hangscope/identity/rank_identity.h"

namespace hangscope::capture {

struct ProcessRecord {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::string comm;
  std::string cmdline;  // secrets masked
  std::string exe;
  char state = '?';
  std::uint64_t utime_ticks = 0;
  std::uint64_t stime_ticks = 0;
  std::uint64_t start_time_ticks = 0;
  identity::RankIdentity identity;
  pid_t helper_of = 0;  // a helper (child sharing a rank's environment) names its rank
  std::map<std::string, std::string> environment;  // allowlisted, masked
  std::string environment_source;
  std::optional<ProcessDump> dump;
  std::vector<identity::LogExcerpt> logs;    // its stdout/stderr files, masked
  std::map<std::string, std::string> facts;  // "version.torch" → "1.13.0", … (facts/)
  std::optional<collectives::FlightRecord> flight_record;  // its newest flight-recorder dump
  std::string error;                                       // why it could not be captured
};

struct NodeSnapshot {
  std::string node_name;
  std::string hostname;
  std::int64_t capture_unix_ns = 0;
  int sample_index = 0;
  std::vector<ProcessRecord> processes;  // ascending pid
  std::vector<std::string> notes;
  std::chrono::nanoseconds capture_time{0};
};

struct NodeCaptureOptions {
  CaptureOptions process;
  std::vector<pid_t> pids;             // explicit processes; empty = discover
  std::string node_name;               // default: the hostname
  std::vector<std::string> log_globs;  // shared log files, lines attributed by "pid=N"
  std::string select;  // ECMAScript regex: only discovered processes whose command line matches
  // Ask every rank for a fresh flight-recorder dump through its TORCH_NCCL_DEBUG_INFO_PIPE_FILE
  // fifo (after its stacks were captured) and wait up to `flight_dump_timeout` for them.
  bool trigger_flight_dumps = false;
  std::chrono::milliseconds flight_dump_timeout{5000};
  std::chrono::seconds flight_dump_stale_after{600};  // older dumps are marked not fresh
  // Ask each rank's c10d store (MASTER_ADDR:MASTER_PORT), read-only, which of the keys its
  // waiting frame awaits exist (needs the locals: process.locals).
  bool query_store = false;
};

// Which processes of this node are worth capturing: recognised titles (vLLM, Ray, SGLang),
// processes with rank variables, and Python interpreters. Never hangscope itself.
std::vector<pid_t> discover_processes();

NodeSnapshot capture_node(const NodeCaptureOptions& options);

}  // namespace hangscope::capture

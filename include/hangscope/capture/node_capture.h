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
#include "hangscope/model/node_snapshot.h"

namespace hangscope::capture {

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

model::NodeSnapshot capture_node(const NodeCaptureOptions& options);

}  // namespace hangscope::capture

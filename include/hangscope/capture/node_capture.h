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
#include "hangscope/capture/process_selection.h"
#include "hangscope/model/node_snapshot.h"

namespace hangscope::capture {

// What a node capture reads besides its processes: shared logs, fresh flight-recorder dumps
// and the c10d stores' keys (--log, --trigger-fr-dump, --query-store).
struct ExtraEvidence {
  std::vector<std::string> log_globs;  // shared log files, lines attributed by "pid=N"
  // Ask every rank for a fresh flight-recorder dump through its TORCH_NCCL_DEBUG_INFO_PIPE_FILE
  // fifo (after its stacks were captured); NodeCaptureOptions says how long to wait.
  bool trigger_flight_dumps = false;
  // Ask each rank's c10d store (MASTER_ADDR:MASTER_PORT), read-only, which of the keys its
  // waiting frame awaits exist (needs the locals: process.locals).
  bool query_store = false;
};

struct NodeCaptureOptions {
  CaptureOptions process;
  ProcessSelection selection;
  ExtraEvidence evidence;
  // How long fresh flight-recorder dumps (evidence.trigger_flight_dumps) are waited for.
  std::chrono::milliseconds flight_dump_timeout{5000};
  std::chrono::seconds flight_dump_stale_after{600};  // older dumps are marked not fresh
};

// Which processes of this node are worth capturing: recognised titles (vLLM, Ray, SGLang),
// processes with rank variables, and Python interpreters. Never hangscope itself.
std::vector<pid_t> discover_processes();

model::NodeSnapshot capture_node(const NodeCaptureOptions& options);

}  // namespace hangscope::capture

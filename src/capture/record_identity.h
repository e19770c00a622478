// Private to capture: a process record's identity from what its memory and logs say — its
// torch.distributed state, the arguments of a rank still inside init_process_group, vLLM's log.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hangscope/identity/environment.h"
#include "hangscope/model/node_snapshot.h"

namespace hangscope::capture {

// The record's environment (masked, allowlisted), where it was read, and the identity it and the
// command line (or title) give: the same for a live process and a core.
void identify_from_environment(model::ProcessRecord& record, const identity::Environment& env,
                               std::string_view command_line);

// vLLM's "world_size=… rank=…" line in the process's own logs, when nothing else said.
void identify_from_logs(model::ProcessRecord& record);

// The same for a node's processes, from the logs only one of them writes
// (identity::identify_from_own_logs).
void identify_from_own_logs(std::vector<model::ProcessRecord>& records);

// "tcp://10.0.0.1:29500" → "10.0.0.1:29500", the job key MASTER_ADDR:MASTER_PORT gives.
std::string job_from_init_method(std::string_view method);

// torch.distributed's own state outranks the environment, titles and logs: a process that holds
// a process group is a rank, the rank its C++ ProcessGroup says (docs/analysis.md). Without a
// group, a rank inside init_process_group is known by its waiting frames' arguments.
void identify_from_memory(model::ProcessRecord& record);

}  // namespace hangscope::capture

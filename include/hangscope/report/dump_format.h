// Renderings of a process dump: human text (like eu-stack), JSON (design.md contract). On the wire
// a dump travels inside a node snapshot (snapshot.proto, snapshot/codec.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hangscope/model/process_dump.h"

namespace hangscope::report {

std::string dump_to_text(const model::ProcessDump& dump);
nlohmann::json dump_to_json(const model::ProcessDump& dump);
// torch.distributed's state as read from memory: {"rank", "world_size", "init_method",
// "registry", "coordinates", "groups": [{"name", "backend", "ranks", "group_rank", "sequence",
// "default", "labels"}], "notes"}.
nlohmann::json distributed_to_json(const model::DistributedState& state);
// One line per group for people: "process group 3 (gloo, vllm:tp): ranks 0,1; this rank 1; 12
// collectives issued".
std::string distributed_to_text(const model::DistributedState& state);
// An asyncio task's state as the dump prints it: "pending", "cancelled", "finished".
std::string task_state_name(model::AsyncTask::State state);
// One task for people: `Task "Task-3" pending [running], awaits Task "Task-2" (0x7f…)`, then its
// coroutine chain innermost first, each line indented by `indent`.
std::string task_to_text(const model::AsyncTask& task, const model::ProcessDump& dump,
                         const std::string& indent);
nlohmann::json task_to_json(const model::AsyncTask& task);
// One socket: {"fd", "inode", "family" ("unix" | "tcp"), "type", "state", and "path",
// "peer_inode" (unix) or "local", "remote" (tcp)}.
nlohmann::json socket_to_json(const model::Socket& socket);
// One socket for people: "fd 7 unix stream connected /tmp/x.ipc, peer inode 4242 (inode 4241)".
std::string socket_to_text(const model::Socket& socket);
// A group's global ranks, compressed: "0-7", "0,2,4,6".
std::string group_ranks_text(const model::ProcessGroupState& group);

}  // namespace hangscope::report

// A process's part in a serving deployment (vLLM V1, SGLang): engine core, API server or DP
// coordinator, from its title, its frames and its asyncio tasks. Decided once, when a node is
// captured (capture::capture_node), and for the records of snapshots written before that, when
// a source reads them (sources/); the analysis only reads ProcessIdentity::role.
#pragma once

#include <optional>
#include <vector>

#include "hangscope/model/node_snapshot.h"

namespace hangscope::waits {

// The serving role of `process`, nullopt when it plays none: an engine core (titled
// EngineCore, or its busy loop on a stack), a DP coordinator (titled DPCoordinator, or its
// frames), an API server (titled APIServer, request tasks, an API server's event-loop thread,
// or the parent of an engine core (`parent_of_engine`) that runs asyncio tasks or is `vllm
// serve` itself rather than its launcher). SGLang's launcher that serves only /health plays
// none.
std::optional<model::ProcessRole> serving_role(const model::ProcessRecord& process,
                                               bool parent_of_engine);

// Gives every process of one node's sample that is no rank or helper the serving role its
// record says (a launcher that is an engine core becomes the engine core). Returns how many
// records changed.
std::size_t assign_serving_roles(std::vector<model::ProcessRecord>& processes);

}  // namespace hangscope::waits

// What diagnose analyses: every sample of every node, and how each node answered.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/snapshot/node_snapshot.h"

namespace hangscope::analysis {

struct NodeStatus {
  std::string name;
  std::optional<std::string> address;  // host:port of its agent; nullopt for files and local
  std::string status = "ok";           // ok | unreachable | refused | error
  std::string error;
  std::int64_t clock_offset_ns = 0;  // node clock minus the coordinator's (agents' Info)
};

struct Bundle {
  std::vector<snapshot::NodeSnapshot> snapshots;  // every sample of every node
  std::vector<NodeStatus> nodes;
};

// The newest sample of each node, by node name.
std::map<std::string, const snapshot::NodeSnapshot*> latest_samples(const Bundle& bundle);

}  // namespace hangscope::analysis

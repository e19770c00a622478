// What diagnose analyses: every sample of every node, and how each node answered.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/model/node_snapshot.h"

namespace hangscope::model {

// How a node answered; code branches on it. Its name (`to_string`) is what report.json's and a
// bundle's nodes.json `status` say, from which a saved bundle's nodes are read
// (`parse_node_state`).
enum class NodeState {
  kOk,           // "ok": it answered
  kUnreachable,  // "unreachable": no answer (connection failed, deadline passed)
  kRefused,      // "refused": its agent refused us (token, TLS, arguments)
  kBusy,         // "busy": its agent stayed busy with other captures
  kError,        // "error": it answered with an error, or its file could not be read
};
// "ok", "unreachable", "refused", "busy", "error".
std::string_view to_string(NodeState state);
// The state a name says; kError for a name no version wrote.
NodeState parse_node_state(std::string_view name);

struct NodeStatus {
  std::string name;
  std::optional<std::string> address;  // host:port of its agent; nullopt for files and local
  NodeState status = NodeState::kOk;
  std::string error;
  std::int64_t clock_offset_ns = 0;  // node clock minus the coordinator's (agents' Info)
};

struct Bundle {
  std::vector<NodeSnapshot> snapshots;  // every sample of every node
  std::vector<NodeStatus> nodes;
};

// One node's answer, before it joins a bundle: how it answered (its name: the name the node
// gave), where it came from (an agent's address, a snapshot file) and its samples.
struct NodeAnswer {
  NodeStatus status;
  std::string source;
  std::vector<NodeSnapshot> samples;
};

// The bundle of `answers` in their order, each node under a name of its own, which its samples
// take too (a node is the agent or file that answered, whatever its snapshots call it). Two
// answers that give one name (two agents started with the same --node-name, two hosts with one
// hostname) would make one node whose ranks are each other's "dead": each is named
// "NAME@SOURCE" (and "#2", … if the sources are the same too), and a note in its samples says so
// (also added to `renamed` when given).
Bundle assemble_bundle(std::vector<NodeAnswer> answers,
                       std::vector<std::string>* renamed = nullptr);

// The newest sample of each node, by node name.
std::map<std::string, const NodeSnapshot*> latest_samples(const Bundle& bundle);

}  // namespace hangscope::model

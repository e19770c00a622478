// The diagnose report of a bundle (all samples of all nodes): report.json (design contract)
// and report.md. Until the correlation lands, it is the rank table, processes and nodes.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/capture/node_capture.h"

namespace hangscope::report {

struct NodeStatus {
  std::string name;
  std::optional<std::string> address;  // host:port of its agent; nullopt for files and local
  std::string status = "ok";           // ok | unreachable | refused | error
  std::string error;
};

struct Bundle {
  std::vector<capture::NodeSnapshot> snapshots;  // every sample of every node
  std::vector<NodeStatus> nodes;
};

nlohmann::json report_json(const Bundle& bundle);
std::string report_markdown(const nlohmann::json& report);

}  // namespace hangscope::report

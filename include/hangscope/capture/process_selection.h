// The processes a node capture or observation looks at (--pid, --select) and --node-name.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hangscope::capture {

// Which processes of a node are captured or observed, and the node's name.
struct ProcessSelection {
  std::vector<pid_t> pids;  // explicit processes; empty = discover the node's ranks
  std::string select;       // RE2: only processes whose command line, name or executable matches
  std::string node_name;    // default: the hostname

  // The node's name: node_name when given, else `hostname`.
  std::string node_name_or(const std::string& hostname) const {
    return node_name.empty() ? hostname : node_name;
  }
};

}  // namespace hangscope::capture

// A process's TCP connections as the "net.tcp" fact records them.
#pragma once

#include <string>
#include <vector>

namespace hangscope::model {

// The connections recorded in a "net.tcp" fact: (local, remote, established).
struct RecordedConnection {
  std::string local, remote;
  bool established = true;
};
std::vector<RecordedConnection> parse_recorded_connections(const std::string& net_tcp);

}  // namespace hangscope::model

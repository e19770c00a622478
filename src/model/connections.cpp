#include "hangscope/model/connections.h"

#include <sstream>

namespace hangscope::model {

std::vector<RecordedConnection> parse_recorded_connections(const std::string& net_tcp) {
  std::vector<RecordedConnection> out;
  std::istringstream in(net_tcp);
  for (std::string item; in >> item;) {
    const auto at = item.find_first_of(">~");
    if (at == std::string::npos) continue;
    out.push_back({item.substr(0, at), item.substr(at + 1), item[at] == '>'});
  }
  return out;
}

}  // namespace hangscope::model

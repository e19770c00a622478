#include "hangscope/snapshot/bundle_layout.h"

#include <algorithm>
#include <cctype>

#include "hangscope/common/files.h"

namespace hangscope::snapshot {

bool is_snapshot_file_name(std::string_view name) {
  std::string_view node;
  if (name.ends_with(".json")) {
    node = name.substr(0, name.size() - 5);
  } else if (name.ends_with(".pb")) {
    node = name.substr(0, name.size() - 3);
  } else {
    return false;
  }
  return !node.empty() && std::all_of(node.begin(), node.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

bool is_new_file_of_snapshot(std::string_view name) {
  const auto at = name.rfind(".new-");
  return name.size() > 1 && name.front() == '.' && at != std::string_view::npos &&
         is_snapshot_file_name(name.substr(1, at - 1)) &&
         is_replacement_of(name, name.substr(1, at - 1));
}

}  // namespace hangscope::snapshot

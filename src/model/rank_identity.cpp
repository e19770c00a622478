#include "hangscope/model/rank_identity.h"

#include <array>
#include <utility>

namespace hangscope::model {
namespace {

constexpr std::array<std::pair<ProcessRole, std::string_view>, 8> kRoleNames = {{
    {ProcessRole::kUnidentified, "unidentified"},
    {ProcessRole::kRank, "rank"},
    {ProcessRole::kEngine, "engine"},
    {ProcessRole::kApi, "api"},
    {ProcessRole::kDriver, "driver"},
    {ProcessRole::kCoordinator, "coordinator"},
    {ProcessRole::kLauncher, "launcher"},
    {ProcessRole::kHelper, "helper"},
}};

}  // namespace

std::string_view to_string(ProcessRole role) {
  for (const auto& [r, name] : kRoleNames) {
    if (r == role) return name;
  }
  return "unidentified";
}

ProcessRole parse_role(std::string_view name) {
  for (const auto& [r, n] : kRoleNames) {
    if (n == name) return r;
  }
  return ProcessRole::kUnidentified;
}

}  // namespace hangscope::model

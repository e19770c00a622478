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

constexpr std::array<std::pair<IdentitySource, std::string_view>, 9> kSourceNames = {{
    {IdentitySource::kNone, ""},
    {IdentitySource::kEnv, "env"},
    {IdentitySource::kMemoryEnv, "memory-env"},
    {IdentitySource::kTitle, "title"},
    {IdentitySource::kLog, "log"},
    {IdentitySource::kMemoryProcessGroup, "memory:process-group"},
    {IdentitySource::kMemoryInitArguments, "memory:init-arguments"},
    {IdentitySource::kFlightRecorder, "flight-recorder"},
    {IdentitySource::kOther, "other"},
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

std::string_view to_string(IdentitySource source) {
  for (const auto& [value, name] : kSourceNames) {
    if (value == source) return name;
  }
  return "other";
}

IdentitySource parse_identity_source(std::string_view name) {
  for (const auto& [value, text] : kSourceNames) {
    if (text == name) return value;
  }
  return IdentitySource::kOther;
}

}  // namespace hangscope::model

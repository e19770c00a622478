#include "hangscope/model/rank_identity.h"

#include <array>
#include <utility>

#include "name_table.h"

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
  return names::name_in(kRoleNames, role, "unidentified");
}

ProcessRole parse_role(std::string_view name) {
  return names::value_in(kRoleNames, name, ProcessRole::kUnidentified);
}

std::string_view to_string(IdentitySource source) {
  return names::name_in(kSourceNames, source, "other");
}

IdentitySource parse_identity_source(std::string_view name) {
  return names::value_in(kSourceNames, name, IdentitySource::kOther);
}

}  // namespace hangscope::model

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

// The name of `value` in `table`, or `fallback`; the value a name stands for, or `fallback`.
template <typename Value, std::size_t N>
std::string_view name_in(const std::array<std::pair<Value, std::string_view>, N>& table,
                         Value value, std::string_view fallback) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return fallback;
}

template <typename Value, std::size_t N>
Value value_in(const std::array<std::pair<Value, std::string_view>, N>& table,
               std::string_view name, Value fallback) {
  for (const auto& [v, text] : table) {
    if (text == name) return v;
  }
  return fallback;
}

}  // namespace

std::string_view to_string(ProcessRole role) {
  return name_in(kRoleNames, role, "unidentified");
}

ProcessRole parse_role(std::string_view name) {
  return value_in(kRoleNames, name, ProcessRole::kUnidentified);
}

std::string_view to_string(IdentitySource source) {
  return name_in(kSourceNames, source, "other");
}

IdentitySource parse_identity_source(std::string_view name) {
  return value_in(kSourceNames, name, IdentitySource::kOther);
}

}  // namespace hangscope::model

#include "hangscope/model/rank_identity.h"

#include <array>
#include <utility>

namespace hangscope::model {
namespace {

constexpr std::array<std::pair<IdentitySource, std::string_view>, 9> kNames = {{
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

std::string_view to_string(IdentitySource source) {
  for (const auto& [value, name] : kNames) {
    if (value == source) return name;
  }
  return "other";
}

IdentitySource parse_identity_source(std::string_view name) {
  for (const auto& [value, text] : kNames) {
    if (text == name) return value;
  }
  return IdentitySource::kOther;
}

}  // namespace hangscope::model

#include "hangscope/model/flight_record.h"

#include <algorithm>
#include <cctype>

#include "name_table.h"

namespace hangscope::model {
namespace {

constexpr names::Table<FlightState, 4> kFlightStateNames = {{
    {FlightState::kUnknown, ""},
    {FlightState::kScheduled, "scheduled"},
    {FlightState::kStarted, "started"},
    {FlightState::kCompleted, "completed"},
}};

}  // namespace

std::string_view to_string(FlightState state) {
  return names::name_in(kFlightStateNames, state, "");
}

FlightState parse_flight_state(std::string_view name) {
  return names::value_in(kFlightStateNames, name, FlightState::kUnknown);
}

std::string FlightEntry::describe() const {
  std::string out = profiling_name.empty() ? "(unnamed)" : profiling_name;
  out += " #" + std::to_string(is_p2p ? p2p_seq_id : collective_seq_id);
  if (!input_sizes.empty() && input_sizes != "[]") out += " " + input_sizes;
  if (!input_dtypes.empty() && input_dtypes != "[]") out += " " + input_dtypes;
  if (state != FlightState::kUnknown) out += " " + std::string(to_string(state));
  return out;
}

std::optional<int> rank_from_file_name(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  const auto dot = name.find_last_of('.');
  if (dot != std::string::npos && std::none_of(name.begin() + static_cast<long>(dot), name.end(),
                                               [](char c) { return c >= '0' && c <= '9'; })) {
    name.resize(dot);
  }
  std::size_t digits = 0;
  while (digits < name.size() &&
         std::isdigit(static_cast<unsigned char>(name[name.size() - 1 - digits])) != 0) {
    ++digits;
  }
  if (digits == 0 || digits > 9) return std::nullopt;
  return std::stoi(name.substr(name.size() - digits));
}

}  // namespace hangscope::model

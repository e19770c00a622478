// A flight record as the compact JSON text schema 2.0 snapshots carried (and tests compare):
// both ways.
#pragma once

#include <nlohmann/json.hpp>

#include "hangscope/model/flight_record.h"

namespace hangscope::snapshot {

// flight_record_from_json throws nlohmann::json's exceptions for a value of the wrong type and
// hangscope::Error for a number that is not a 64-bit whole number (or a rank beyond int).
nlohmann::json flight_record_to_json(const model::FlightRecord& record);
model::FlightRecord flight_record_from_json(const nlohmann::json& j);

}  // namespace hangscope::snapshot

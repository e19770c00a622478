// A rank's flight record in a snapshot: the FlightRecord message (schema 2.1) both ways, and the
// JSON text that schema 2.0 carried, read for old snapshots and bundles.
#pragma once

#include <string>

#include "hangscope/model/flight_record.h"
#include "hangscope/v1/snapshot.pb.h"

namespace hangscope::snapshot {

void encode_flight(const model::FlightRecord& record, v1::FlightRecord& out);
model::FlightRecord decode_flight(const v1::FlightRecord& in);
// Schema 2.0's text; a record whose `error` says why when the text is not a record.
model::FlightRecord decode_flight_json(const std::string& text);

}  // namespace hangscope::snapshot

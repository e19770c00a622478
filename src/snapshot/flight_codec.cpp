#include "flight_codec.h"

#include <nlohmann/json.hpp>

#include "hangscope/common/bounded_json.h"
#include "hangscope/common/error.h"
#include "hangscope/common/text.h"
#include "hangscope/snapshot/flight_json.h"

namespace hangscope::snapshot {
namespace {

// model::FlightState and its wire enum (schema 2.5), in both directions; kUnknown has none
// (UNSPECIFIED), so that a reader falls back to the text.
constexpr std::pair<model::FlightState, v1::FlightState> kFlightStates[] = {
    {model::FlightState::kScheduled, v1::FLIGHT_STATE_SCHEDULED},
    {model::FlightState::kStarted, v1::FLIGHT_STATE_STARTED},
    {model::FlightState::kCompleted, v1::FLIGHT_STATE_COMPLETED},
};

v1::FlightState wire_flight_state(model::FlightState state) {
  for (const auto& [model_value, wire] : kFlightStates) {
    if (model_value == state) return wire;
  }
  return v1::FLIGHT_STATE_UNSPECIFIED;
}

// The enum when written (2.5), else the text older writers sent, read once here.
model::FlightState flight_state_of(const v1::FlightEntry& in) {
  for (const auto& [model_value, wire] : kFlightStates) {
    if (wire == in.state_kind()) return model_value;
  }
  return model::parse_flight_state(in.state());
}

void encode_entry(const model::FlightEntry& e, v1::FlightEntry& out) {
  out.set_pg(valid_utf8(e.pg));
  out.set_collective_seq_id(e.collective_seq_id);
  out.set_p2p_seq_id(e.p2p_seq_id);
  out.set_is_p2p(e.is_p2p);
  out.set_profiling_name(valid_utf8(e.profiling_name));
  out.set_input_sizes(valid_utf8(e.input_sizes));
  out.set_input_dtypes(valid_utf8(e.input_dtypes));
  out.set_output_sizes(valid_utf8(e.output_sizes));
  out.set_state(std::string(model::to_string(e.state)));
  out.set_state_kind(wire_flight_state(e.state));
  out.set_time_created_ns(e.time_created_ns);
}

model::FlightEntry decode_entry(const v1::FlightEntry& in) {
  model::FlightEntry e;
  e.pg = in.pg();
  e.collective_seq_id = in.collective_seq_id();
  e.p2p_seq_id = in.p2p_seq_id();
  e.is_p2p = in.is_p2p();
  e.profiling_name = in.profiling_name();
  e.input_sizes = in.input_sizes();
  e.input_dtypes = in.input_dtypes();
  e.output_sizes = in.output_sizes();
  e.state = flight_state_of(in);
  e.time_created_ns = in.time_created_ns();
  return e;
}

void encode_group(const model::FlightGroup& g, v1::FlightGroup& out) {
  out.set_id(valid_utf8(g.id));
  out.set_name(valid_utf8(g.name));
  out.set_desc(valid_utf8(g.desc));
  for (int r : g.ranks) out.add_ranks(r);
  if (g.last_enqueued) out.set_last_enqueued(*g.last_enqueued);
  if (g.last_started) out.set_last_started(*g.last_started);
  if (g.last_completed) out.set_last_completed(*g.last_completed);
}

model::FlightGroup decode_group(const v1::FlightGroup& in) {
  model::FlightGroup g;
  g.id = in.id();
  g.name = in.name();
  g.desc = in.desc();
  g.ranks.assign(in.ranks().begin(), in.ranks().end());
  if (in.has_last_enqueued()) g.last_enqueued = in.last_enqueued();
  if (in.has_last_started()) g.last_started = in.last_started();
  if (in.has_last_completed()) g.last_completed = in.last_completed();
  return g;
}

}  // namespace

void encode_flight(const model::FlightRecord& record, v1::FlightRecord& out) {
  out.set_path(valid_utf8(record.path));
  out.set_format(valid_utf8(record.format));
  out.set_version(valid_utf8(record.version));
  if (record.rank) out.set_rank(*record.rank);
  out.set_written_unix_ns(record.written_unix_ns);
  out.set_fresh(record.fresh);
  for (const auto& [id, group] : record.groups) encode_group(group, *out.add_groups());
  for (const auto& e : record.entries) encode_entry(e, *out.add_entries());
  out.set_error(valid_utf8(record.error));
}

model::FlightRecord decode_flight(const v1::FlightRecord& in) {
  model::FlightRecord r;
  r.path = in.path();
  r.format = in.format();
  r.version = in.version();
  if (in.has_rank()) r.rank = in.rank();
  r.written_unix_ns = in.written_unix_ns();
  r.fresh = in.fresh();
  for (const auto& g : in.groups()) {
    auto group = decode_group(g);
    const auto id = group.id;
    r.groups.insert_or_assign(id, std::move(group));
  }
  for (const auto& e : in.entries()) r.entries.push_back(decode_entry(e));
  r.error = in.error();
  return r;
}

model::FlightRecord decode_flight_json(const std::string& text) {
  const auto unreadable = [](const char* why) {
    model::FlightRecord r;
    // The parser's message quotes the bad bytes, which may end inside a UTF-8 sequence.
    r.error = valid_utf8(std::string("unreadable in the snapshot: ") + why);
    return r;
  };
  // The compact record (flight_record_to_json): a few levels deep; its size is the snapshot's.
  constexpr JsonLimits kRecord{16, 1u << 22, 256u << 20};
  try {
    return flight_record_from_json(parse_json_within(text, kRecord));
  } catch (const nlohmann::json::exception& e) {
    return unreadable(e.what());
  } catch (const Error& e) {  // past the limits, or a number that is no 64-bit whole number
    return unreadable(e.what());
  }
}

}  // namespace hangscope::snapshot

#include "hangscope/snapshot/flight_json.h"

#include <cstdint>
#include <limits>
#include <string>

#include "hangscope/common/error.h"

namespace hangscope::snapshot {

using json = nlohmann::json;

json flight_record_to_json(const model::FlightRecord& r) {
  json groups = json::object();
  for (const auto& [id, g] : r.groups) {
    json j = {{"name", g.name}, {"desc", g.desc}, {"ranks", g.ranks}};
    if (g.last_enqueued) j["last_enqueued"] = *g.last_enqueued;
    if (g.last_started) j["last_started"] = *g.last_started;
    if (g.last_completed) j["last_completed"] = *g.last_completed;
    groups[id] = j;
  }
  json entries = json::array();
  for (const auto& e : r.entries) {
    entries.push_back({{"pg", e.pg},
                       {"seq", e.collective_seq_id},
                       {"p2p_seq", e.p2p_seq_id},
                       {"is_p2p", e.is_p2p},
                       {"op", e.profiling_name},
                       {"input_sizes", e.input_sizes},
                       {"input_dtypes", e.input_dtypes},
                       {"output_sizes", e.output_sizes},
                       {"state", model::to_string(e.state)},
                       {"time_created_ns", e.time_created_ns}});
  }
  json out = {{"path", r.path},       {"format", r.format},
              {"version", r.version}, {"written_unix_ns", r.written_unix_ns},
              {"fresh", r.fresh},     {"groups", groups},
              {"entries", entries},   {"error", r.error}};
  if (r.rank) out["rank"] = *r.rank;
  return out;
}

namespace {

// A whole number of the compact record (to_json writes int64 values). nlohmann's
// get<std::int64_t>() converts a float, or an integer beyond int64 (parsed as a float), with
// undefined behaviour when it does not fit: a snapshot file is any text, so those are refused.
std::int64_t whole_number(const json& value, const char* what) {
  if (value.is_number_integer() &&
      !(value.is_number_unsigned() &&
        value.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) {
    return value.get<std::int64_t>();
  }
  throw Error(std::string("`") + what + "` is not a 64-bit whole number: " + value.dump());
}

std::int64_t whole_number_or(const json& object, const char* key, std::int64_t fallback) {
  return object.contains(key) ? whole_number(object[key], key) : fallback;
}

}  // namespace

model::FlightRecord flight_record_from_json(const json& j) {
  model::FlightRecord r;
  r.path = j.value("path", "");
  r.format = j.value("format", "");
  r.version = j.value("version", "");
  r.written_unix_ns = whole_number_or(j, "written_unix_ns", 0);
  r.fresh = j.value("fresh", true);
  r.error = j.value("error", "");
  if (j.contains("rank") && j["rank"].is_number_integer()) r.rank = j["rank"].get<int>();
  // Named copies: iterating items() of a temporary would read freed memory.
  const json groups = j.value("groups", json::object());
  const json entries = j.value("entries", json::array());
  for (const auto& [id, g] : groups.items()) {
    model::FlightGroup group;
    group.id = id;
    group.name = g.value("name", "");
    group.desc = g.value("desc", "");
    for (const auto& rank : g.value("ranks", json::array())) {
      const auto n = whole_number(rank, "ranks");
      if (n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max()) {
        throw Error("a rank beyond int: " + std::to_string(n));
      }
      group.ranks.push_back(static_cast<int>(n));
    }
    if (g.contains("last_enqueued"))
      group.last_enqueued = whole_number(g["last_enqueued"], "last_enqueued");
    if (g.contains("last_started"))
      group.last_started = whole_number(g["last_started"], "last_started");
    if (g.contains("last_completed"))
      group.last_completed = whole_number(g["last_completed"], "last_completed");
    r.groups[id] = group;
  }
  for (const auto& e : entries) {
    model::FlightEntry entry;
    entry.pg = e.value("pg", "");
    entry.collective_seq_id = whole_number_or(e, "seq", 0);
    entry.p2p_seq_id = whole_number_or(e, "p2p_seq", 0);
    entry.is_p2p = e.value("is_p2p", false);
    entry.profiling_name = e.value("op", "");
    entry.input_sizes = e.value("input_sizes", "");
    entry.input_dtypes = e.value("input_dtypes", "");
    entry.output_sizes = e.value("output_sizes", "");
    entry.state = model::parse_flight_state(e.value("state", ""));
    entry.time_created_ns = whole_number_or(e, "time_created_ns", 0);
    r.entries.push_back(entry);
  }
  return r;
}

}  // namespace hangscope::snapshot

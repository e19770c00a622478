// A rank's flight-recorder dump as a snapshot carries it: the last operations of each process
// group with their state, and the groups' progress counters (collectives/ reads the dumps).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hangscope::model {

// Where an operation of the ring buffer is, as the dump says; the analysis branches on it. Its
// name (`to_string`) is what dumps, the schema 2.0 JSON and the wire's `state` text say, from
// which dumps and older snapshots are read (`parse_flight_state`).
enum class FlightState {
  kUnknown,    // "": no state, or a name torch does not write
  kScheduled,  // "scheduled": enqueued, not started on the device
  kStarted,    // "started"
  kCompleted,  // "completed"
};
// "", "scheduled", "started", "completed".
std::string_view to_string(FlightState state);
// The state a name says; kUnknown for "" and any name but the three torch writes.
FlightState parse_flight_state(std::string_view name);

// One collective or p2p operation of the ring buffer.
struct FlightEntry {
  std::string pg;  // key of pg_config ("0"), from process_group[0]
  std::int64_t collective_seq_id = 0;
  std::int64_t p2p_seq_id = 0;
  bool is_p2p = false;
  std::string profiling_name;                           // "nccl:all_reduce"
  std::string input_sizes, input_dtypes, output_sizes;  // compact JSON text, "[[3,4]]"
  FlightState state = FlightState::kUnknown;
  std::int64_t time_created_ns = 0;
  std::string describe() const;  // "nccl:all_reduce #12 [[3,4]] Float started"
};

// A process group as the dump describes it, with its progress counters.
struct FlightGroup {
  std::string id;          // key of pg_config
  std::string name;        // pg_config[id].name
  std::string desc;        // "default_pg", "undefined", …
  std::vector<int> ranks;  // global ranks
  std::optional<std::int64_t> last_enqueued, last_started, last_completed;  // pg_status
};

struct FlightRecord {
  std::string path;    // as the rank sees it
  std::string format;  // pickle | json
  std::string version;
  std::optional<int> rank;           // the dump's own `rank` key, else the file name's suffix
  std::int64_t written_unix_ns = 0;  // the file's mtime
  bool fresh = true;                 // written less than the staleness limit before the capture
  std::map<std::string, FlightGroup> groups;  // by pg id
  std::vector<FlightEntry> entries;           // the last entries per group, oldest first
  std::string error;                          // why it could not be read ("" when fine)
};

// The rank a dump's file name ends with: the trailing digits of its base name, after dropping an
// extension without digits ("nccl_trace_rank_12" and "host-a.rank3.json" give 12 and 3); nullopt
// when there are none or they exceed int.
std::optional<int> rank_from_file_name(const std::string& path);

}  // namespace hangscope::model

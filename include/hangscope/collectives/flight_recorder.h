// PyTorch flight-recorder dumps of one rank: where they are (the rank's TORCH_FR_DUMP_TEMP_FILE /
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE prefix, or the defaults), reading them in both formats (the
// C++ pickle by default, JSON), triggering a fresh dump through the rank's debug-info fifo, and
// the compact record of it that travels in a snapshot.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace hangscope::collectives {

// One collective or p2p operation of the ring buffer.
struct FlightEntry {
  std::string pg;  // key of pg_config ("0"), from process_group[0]
  std::int64_t collective_seq_id = 0;
  std::int64_t p2p_seq_id = 0;
  bool is_p2p = false;
  std::string profiling_name;                           // "nccl:all_reduce"
  std::string input_sizes, input_dtypes, output_sizes;  // compact JSON text, "[[3,4]]"
  std::string state;                                    // scheduled | started | completed
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

// Reads a dump's bytes (pickle when it starts with PROTO, else JSON); throws hangscope::Error
// naming what is wrong. Keeps the last `max_entries_per_group` entries of each group.
FlightRecord parse_flight_record(const std::string& bytes, std::size_t max_entries_per_group = 32);

// The rank a dump's file name ends with: the trailing digits of its base name, after dropping an
// extension without digits ("nccl_trace_rank_12" and "host-a.rank3.json" give 12 and 3); nullopt
// when there are none or they exceed int.
std::optional<int> rank_from_file_name(const std::string& path);

// The dump path prefixes a rank's environment names, in order: TORCH_FR_DUMP_TEMP_FILE,
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE, then $HOME/.cache/torch/comm_lib_trace_rank_ and
// /tmp/nccl_trace_rank_.
std::vector<std::string> dump_prefixes(const std::map<std::string, std::string>& env);

// The newest dump of `rank` under `root` (the process's /proc/PID/root), read and parsed;
// nullopt when none exists. A dump older than `stale_after` before `capture_unix_ns` is kept but
// marked not fresh. Unreadable or malformed dumps come back with `error` set. The paths come from
// the rank's environment and /tmp, so a dump is read only when it is a regular file (no link,
// FIFO or device) owned by `rank_uid` (the rank's effective uid) or root; when no dump passes,
// the first refused one comes back with the reason as its `error`.
std::optional<FlightRecord> read_flight_record(const std::string& root,
                                               const std::map<std::string, std::string>& env,
                                               int rank, uid_t rank_uid,
                                               std::int64_t capture_unix_ns,
                                               std::chrono::seconds stale_after);

// Asks the rank for a dump: writes to its fifo TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe without
// blocking (no reader is an error). The fifo is opened first (O_PATH, no link followed) and
// written only when it is a FIFO owned by `rank_uid` or root: a link, a regular file or a FIFO of
// another user is refused, so root never writes where a job's user points it. Returns "" when
// the request was delivered, else why not, naming the path.
std::string request_flight_dump(const std::string& root,
                                const std::map<std::string, std::string>& env, int rank,
                                uid_t rank_uid);

// Whether a dump of `rank` written at or after `since_unix_ns` exists (a regular file; a link
// does not count).
bool flight_dump_written_since(const std::string& root,
                               const std::map<std::string, std::string>& env, int rank,
                               std::int64_t since_unix_ns);

// Asks the rank for a fresh dump: writes to its fifo TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe
// (never blocking: no reader is an error), then waits up to `timeout` for a dump file newer than
// the request. Returns "" on success, else why not.
std::string trigger_flight_dump(const std::string& root,
                                const std::map<std::string, std::string>& env, int rank,
                                uid_t rank_uid, std::chrono::milliseconds timeout);

// The record as compact JSON (for snapshots) and back. flight_record_from_json throws
// nlohmann::json's exceptions for a value of the wrong type and hangscope::Error for a number
// that is not a 64-bit whole number (or a rank beyond int).
nlohmann::json to_json(const FlightRecord& record);
FlightRecord flight_record_from_json(const nlohmann::json& j);

}  // namespace hangscope::collectives

// PyTorch flight-recorder dumps of one rank: where they are (the rank's TORCH_FR_DUMP_TEMP_FILE /
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE prefix, or the defaults), reading them in both formats (the
// C++ pickle by default, JSON), triggering a fresh dump through the rank's debug-info fifo, and
// their compact record (model/flight_record.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/model/flight_record.h"

namespace hangscope::collectives {

// Reads a dump's bytes (pickle when it starts with PROTO, else JSON); throws hangscope::Error
// naming what is wrong. Keeps the last `max_entries_per_group` entries of each group.
model::FlightRecord parse_flight_record(const std::string& bytes,
                                        std::size_t max_entries_per_group = 32);

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
std::optional<model::FlightRecord> read_flight_record(const std::string& root,
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

}  // namespace hangscope::collectives

// A rank's log, found without being told: the files behind its stdout and stderr. Keeps a
// bounded tail, the lines that matter for a hang, with secrets masked (here, in the agent).
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/model/rank_identity.h"

namespace hangscope::identity {

// Splits on \n and \r (tqdm progress lines), keeps the lines that matter (timeouts, errors,
// warnings, rank lines, cache hits, tuning progress) and the last `tail` lines, masked.
std::vector<std::string> interesting_lines(std::string_view text, std::size_t tail = 20);

// Masks secret-looking words of a log line (Bearer tokens, hf_…, --api-key VALUE, KEY=VALUE).
std::string mask_log_line(std::string_view line);

// The regular files open as fd 1 and 2 of pid (at most the last `max_bytes` of each).
std::vector<model::LogExcerpt> read_process_logs(pid_t pid, std::size_t max_bytes = 256 * 1024);

// Ray's per-worker logs: <ray_root>/session_*/logs/worker-*-<pid>.out and .err.
std::vector<model::LogExcerpt> read_ray_worker_logs(pid_t pid,
                                                    const std::string& ray_root = "/tmp/ray",
                                                    std::size_t max_bytes = 256 * 1024);

// Lines of shared log files (--log GLOB) attributed to processes by the "pid=N" of vLLM's
// "(Worker_TP0 pid=N)" prefixes; only the pids asked for are kept.
std::map<pid_t, model::LogExcerpt> attribute_shared_logs(const std::vector<std::string>& globs,
                                                         const std::set<pid_t>& pids,
                                                         std::size_t max_bytes = 1024 * 1024);

}  // namespace hangscope::identity

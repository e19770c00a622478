// Which processes are ranks, which rank, which job: from the variables, process titles and log
// lines the frameworks leave (the titles and variables each framework's table names,
// waits/frameworks.h: torchrun/env://, vLLM, Ray, SGLang).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/identity/logs.h"
#include "hangscope/model/rank_identity.h"

namespace hangscope::identity {

// What a process title (setproctitle) says about the process.
struct TitleInfo {
  std::string framework;  // "vllm", "ray", "sglang"
  model::ProcessRole role = model::ProcessRole::kUnidentified;
  std::optional<int> tp, pp, dp, ep;
};

// Reads a title as the framework tables' ProcessTitle say (VLLM::Worker[_DP{d}][_PP{p}][_TP{t}]
// [_EP{e}], VLLM::EngineCore[_DP{d}], VLLM::APIServer_{i}, VLLM::DPCoordinator,
// ray::RayWorkerWrapper…, ray::…, sglang::scheduler[_DP{d}][_PP{p}][_TP{t}]); nullopt for any
// other title.
std::optional<TitleInfo> parse_title(std::string_view title);

// `env` is the process environment (`env_from_memory`: read from libc's environ), `title` the
// first word of its command line as setproctitle left it.
model::RankIdentity identify(const std::map<std::string, std::string>& env, bool env_from_memory,
                             std::string_view title);

// vLLM's worker line "world_size=16 rank=4 local_rank=4 …" in a process's own log lines:
// fills rank, world size and local rank (source "log") when the environment did not.
void identify_from_log(const std::vector<std::string>& lines, model::RankIdentity& identity);

// One process's logs and the identity they may complete.
struct ProcessLogs {
  const std::vector<model::LogExcerpt>* logs;
  model::RankIdentity* identity;
};

// identify_from_log on each process's own logs. A log file that several of the processes write
// (a launcher's stdout its children inherit, `launch_server ... > server.log 2>&1`) does not say
// which of them wrote a line: its rank lines identify none of them; only a process whose rank
// is already known takes its dp/pp/tp from the vLLM assignment line that names that rank.
void identify_from_own_logs(const std::vector<ProcessLogs>& processes);

// The key that groups ranks of one job: the first framework's job variables that are set, in
// the tables' order (MASTER_ADDR:MASTER_PORT, else vLLM's DP master, else the Ray job id); ""
// when none is known.
std::string job_key(const std::map<std::string, std::string>& env);

}  // namespace hangscope::identity

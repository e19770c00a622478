// Identity of a process record from what its environment, memory and logs say (live and cores).
#include "record_identity.h"

#include "hangscope/common/numbers.h"
#include "hangscope/common/redaction.h"
#include "hangscope/identity/rank_identity.h"
#include "hangscope/waits/frameworks.h"

namespace hangscope::capture {

void identify_from_environment(model::ProcessRecord& record, const identity::Environment& env,
                               std::string_view command_line) {
  record.environment_source = identity::to_string(env.source);
  record.identity = identity::identify(
      env.variables, env.source == identity::EnvironmentSource::kMemory, command_line);
  record.environment = filter_environment(env.variables);
}

void identify_from_logs(model::ProcessRecord& record) {
  std::vector<std::string> lines;
  for (const auto& log : record.logs) lines.insert(lines.end(), log.lines.begin(), log.lines.end());
  identity::identify_from_log(lines, record.identity);
}

void identify_from_own_logs(std::vector<model::ProcessRecord>& records) {
  std::vector<identity::ProcessLogs> processes;
  for (auto& r : records) processes.push_back({&r.logs, &r.identity});
  identity::identify_from_own_logs(processes);
}

std::string job_from_init_method(std::string_view method) {
  constexpr std::string_view kTcp = "tcp://";
  if (method.substr(0, kTcp.size()) != kTcp) return "";
  method.remove_prefix(kTcp.size());
  return std::string(method.substr(0, method.find_first_of("/?")));
}

namespace {

// A rank inside init_process_group (or its rendezvous) holds no group yet: its rank, world size
// and store address are the arguments of the waiting frames (init_process_group's rank,
// world_size and init_method; _create_c10d_store's hostname and port).
void identify_from_init_frames(model::ProcessRecord& record) {
  const auto unquote = [](const std::string& v) {
    return v.size() >= 2 && v.front() == '\'' ? v.substr(1, v.size() - 2) : v;
  };
  for (const auto& thread : record.dump->threads) {
    std::optional<int> rank, world;
    std::string method, host, port;
    bool init = false;
    for (const auto& frame : thread.python_frames) {
      if (!waits::means(frame, waits::FrameMeaning::kInitArguments)) continue;
      init = true;
      for (const auto& [name, value] : frame.locals) {
        if (name == "rank" && !rank) rank = to_int(value);
        if (name == "world_size" && !world) world = to_int(value);
        if (name == "init_method" && method.empty()) method = unquote(value);
        if (name == "hostname" && host.empty()) host = unquote(value);
        if (name == "port" && port.empty()) port = value;
      }
    }
    if (!init || !rank || *rank < 0) continue;
    auto& id = record.identity;
    id.rank = rank;
    id.role = model::ProcessRole::kRank;
    id.source = model::IdentitySource::kMemoryInitArguments;
    const std::string source(model::to_string(id.source));
    id.sources["rank"] = source;
    if (world && *world > 0) {
      id.world_size = world;
      id.sources["world_size"] = source;
    }
    if (id.job.empty()) id.job = job_from_init_method(method);
    if (id.job.empty() && !host.empty() && to_int(port)) id.job = host + ":" + port;
    return;
  }
}

}  // namespace

void identify_from_memory(model::ProcessRecord& record) {
  if (!record.dump) return;
  const auto& state = record.dump->distributed;
  if (!state || !state->rank) {
    if (record.identity.source != model::IdentitySource::kEnv &&
        record.identity.source != model::IdentitySource::kMemoryEnv) {
      identify_from_init_frames(record);
    }
    return;
  }
  const std::string kSource(model::to_string(model::IdentitySource::kMemoryProcessGroup));
  auto& id = record.identity;
  id.role = model::ProcessRole::kRank;
  id.rank = state->rank;
  id.source = model::IdentitySource::kMemoryProcessGroup;
  id.sources["rank"] = kSource;
  if (state->world_size) {
    id.world_size = state->world_size;
    id.sources["world_size"] = kSource;
  }
  for (const auto& [dimension, field] :
       {std::pair{"tp", &id.tp}, std::pair{"pp", &id.pp}, std::pair{"dp", &id.dp}}) {
    const auto it = state->coordinates.find(dimension);
    if (it == state->coordinates.end()) continue;
    *field = it->second;
    id.sources[dimension] = kSource;
  }
  if (id.job.empty()) id.job = job_from_init_method(state->init_method);
}

}  // namespace hangscope::capture

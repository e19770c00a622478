#include "hangscope/capture/node_capture.h"

#include <re2/re2.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "hangscope/capture/sockets.h"
#include "hangscope/collectives/c10d_store.h"
#include "hangscope/collectives/flight_recorder.h"
#include "hangscope/collectives/nccl_ras.h"
#include "hangscope/collectives/shm_ring.h"
#include "hangscope/common/clock.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/numbers.h"
#include "hangscope/common/redaction.h"
#include "hangscope/common/text.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/facts/caches.h"
#include "hangscope/facts/gpu.h"
#include "hangscope/facts/network.h"
#include "hangscope/facts/shm.h"
#include "hangscope/facts/versions.h"
#include "hangscope/identity/environment.h"
#include "hangscope/identity/logs.h"
#include "hangscope/identity/rank_identity.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/model/package_version.h"
#include "hangscope/model/store_keys.h"
#include "hangscope/native/held_window.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/waits/frameworks.h"
#include "hangscope/waits/serving_roles.h"
#include "hangscope/waits/wait_point.h"
#include "record_identity.h"
#include "socket_tables.h"

namespace hangscope::capture {
namespace {

std::vector<pid_t> all_pids() {
  return proc::list_numeric_entries("/proc").value_or(std::vector<pid_t>{});
}

// The command line with NULs as spaces, trailing padding removed (setproctitle pads).
std::string command_line(pid_t pid) {
  auto read = read_proc_file("/proc/" + std::to_string(pid) + "/cmdline", 64 * 1024);
  std::string text = read.text.value_or("");
  std::replace(text.begin(), text.end(), '\0', ' ');
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string executable(pid_t pid) {
  char buffer[4096];
  const ssize_t n =
      ::readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
}

// --select: the pattern is searched in the command line, which for a process retitled with
// setproctitle (vLLM's "VLLM::Worker_TP0", Ray's "ray::RayWorkerWrapper") is its title, in its
// name (comm), and in its executable's path, which setproctitle leaves alone: `--select python`
// still finds retitled Python workers.
// RE2: linear in the command line, which the target chose (std::regex recursed per character).
bool selected(pid_t pid, const RE2& pattern) {
  if (RE2::PartialMatch(command_line(pid), pattern)) return true;
  if (RE2::PartialMatch(executable(pid), pattern)) return true;
  const auto comm = read_proc_file("/proc/" + std::to_string(pid) + "/comm", 64).text;
  return comm && RE2::PartialMatch(trim(*comm), pattern);
}

bool is_python_executable(const std::string& exe) {
  const auto slash = exe.rfind('/');
  return exe.substr(slash == std::string::npos ? 0 : slash + 1).rfind("python", 0) == 0;
}

std::string hostname() {
  char buffer[256] = {};
  ::gethostname(buffer, sizeof buffer - 1);
  return buffer;
}

// Where a process's facts come from, learned while describing it (read once per process).
struct FactSources {
  std::optional<proc::MemoryMap> maps;           // read once, for the capture too
  std::vector<proc::Mapping> shm_mappings;       // its /dev/shm/psm_* segments (vLLM rings)
  std::vector<std::string> package_paths;        // mapped site-packages libraries, libnccl
  std::map<std::string, std::string> cache_env;  // the variables that place its caches
};

// The variables (unfiltered) that say where a process's caches are.
const std::vector<std::string> kCacheVariables = {"VLLM_CACHE_ROOT",
                                                  "XDG_CACHE_HOME",
                                                  "HOME",
                                                  "VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR",
                                                  "VLLM_DISABLE_COMPILE_CACHE",
                                                  "TORCHINDUCTOR_CACHE_DIR",
                                                  "USER"};

// What one node capture reads once for all its processes: the GPUs, and each cache directory
// (keyed by mount namespace and path) seen by several ranks.
struct NodeFacts {
  std::map<std::string, std::string> gpu;
  std::map<std::string, std::vector<facts::CacheFile>> autotune;
  std::map<std::string, std::vector<facts::P2pCacheFile>> p2p;
  std::map<std::string, std::vector<facts::NetworkInterface>> interfaces;  // by network namespace
  // Every socket table, each read once for the sockets of the processes' dumps and their facts.
  std::shared_ptr<SocketTables> sockets = std::make_shared<SocketTables>();
};

// Identity, environment and fact sources of one process (no stopping involved).
model::ProcessRecord describe_process(pid_t pid, FactSources& sources,
                                      const std::shared_ptr<elf::ModuleCache>& modules) {
  model::ProcessRecord record;
  record.pid = pid;
  proc::ProcessFs fs(pid);
  if (const auto stat = fs.task_stat(pid)) {
    record.ppid = stat->ppid;
    record.comm = stat->comm;
    record.state = stat->state;
    record.utime_ticks = stat->utime_ticks;
    record.stime_ticks = stat->stime_ticks;
    record.start_time_ticks = stat->start_time_ticks;
  }
  const std::string raw_cmdline = command_line(pid);
  record.cmdline = mask_command_line(raw_cmdline);
  record.exe = executable(pid);
  identity::Environment env;
  int error = 0;
  if (auto maps = proc::read_memory_map(pid, &error)) {
    for (const auto& m : maps->mappings()) {
      if (m.is_file() && (m.path.find("-packages/") != std::string::npos ||
                          m.path.find("/libnccl.so.") != std::string::npos)) {
        sources.package_paths.push_back(m.path);
      }
    }
    sources.maps = *maps;
    elf::ProcessImage image(fs, std::move(*maps), modules);
    memory::ProcessMemory memory(pid);
    env = identity::read_environment(fs, image, memory);
  }
  identify_from_environment(record, env, raw_cmdline);
  for (const auto& name : kCacheVariables) {
    if (const auto it = env.variables.find(name); it != env.variables.end()) {
      sources.cache_env[name] = it->second;
    }
  }
  record.logs = identity::read_process_logs(pid);
  for (auto& log : identity::read_ray_worker_logs(pid)) record.logs.push_back(std::move(log));
  return record;  // its logs identify it once every process's logs are known
}

// A process's namespace of one kind ("mnt", "net") as "net:[4026531840]", "" when unreadable:
// paths are shared only between ranks that see the same mounts, sockets between ranks of one
// network namespace.
std::string namespace_id(const std::string& proc_dir, const char* kind) {
  char ns[64] = {};
  const auto n = ::readlink((proc_dir + "/ns/" + kind).c_str(), ns, sizeof ns - 1);
  return std::string(ns, n > 0 ? static_cast<std::size_t>(n) : 0);
}

// Cache facts: vLLM's and torch's cache roots, the FlashInfer autotune files, the rank's
// torch.compile directory, and the GPU P2P access cache.
void collect_cache_facts(model::ProcessRecord& record,
                         const std::map<std::string, std::string>& env, NodeFacts& memo) {
  const std::string proc_dir = "/proc/" + std::to_string(record.pid);
  const std::string root = proc_dir + "/root";
  const std::string ns = namespace_id(proc_dir, "mnt");
  const std::string cache_root = facts::vllm_cache_root(env);
  if (!cache_root.empty()) record.facts[model::fact_keys::kCacheVllmRoot] = cache_root;
  const auto get = [&](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  if (!get("TORCHINDUCTOR_CACHE_DIR").empty()) {
    record.facts[model::fact_keys::kCacheInductorDir] = get("TORCHINDUCTOR_CACHE_DIR");
  } else if (!get("USER").empty()) {
    record.facts[model::fact_keys::kCacheInductorDir] = "/tmp/torchinductor_" + get("USER");
  }
  if (const std::string dir = facts::flashinfer_autotune_dir(env); !dir.empty()) {
    auto it = memo.autotune.find(ns + dir);
    if (it == memo.autotune.end()) {
      it = memo.autotune.emplace(ns + dir, facts::flashinfer_autotune_files(root, dir)).first;
    }
    for (std::size_t i = 0; i < it->second.size(); ++i) {
      record.facts[model::fact_keys::indexed(model::fact_keys::kCacheFlashinferAutotune, i)] =
          it->second[i].describe();
    }
  }
  if (cache_root.empty()) return;
  auto p2p = memo.p2p.find(ns + cache_root);
  if (p2p == memo.p2p.end()) {
    p2p = memo.p2p.emplace(ns + cache_root, facts::gpu_p2p_cache_files(root, cache_root)).first;
  }
  for (std::size_t i = 0; i < p2p->second.size(); ++i) {
    record.facts[model::fact_keys::indexed(model::fact_keys::kCacheGpuP2p, i)] =
        p2p->second[i].describe();
  }
  if (record.identity.rank) {
    const int dp_rank = record.identity.dp.value_or(0);  // the framework tables' DP variable
    const auto compile = facts::torch_compile_cache(root, env, *record.identity.rank, dp_rank);
    if (compile.state != "absent") {
      record.facts[model::fact_keys::kCacheTorchCompileState] = compile.state;
      record.facts[model::fact_keys::kCacheTorchCompile] = compile.describe();
    }
  }
}

// Facts read from the process's own files (after its capture, nothing stopped): package
// versions beside the Python code it runs and the libraries it mapped, NCCL from libnccl's name,
// the interpreter version, /dev/shm, its network, its caches, and the node's GPUs.
void collect_facts(model::ProcessRecord& record, FactSources sources, NodeFacts& memo) {
  auto& paths = sources.package_paths;
  if (record.dump) {
    for (const auto& t : record.dump->threads) {
      for (const auto& f : t.python_frames) paths.push_back(f.file);
    }
    if (record.dump->python) record.facts[model::fact_keys::kVersionPython] = *record.dump->python;
  }
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  const std::string proc_dir = "/proc/" + std::to_string(record.pid);
  for (const auto& [name, version] : facts::package_versions(proc_dir + "/root", paths)) {
    record.facts[model::fact_keys::version(name)] = version;
  }
  if (const auto shm = facts::shm_usage(proc_dir + "/root")) {
    record.facts[model::fact_keys::kShm] = shm->describe();
    record.facts[model::fact_keys::kShmSizeBytes] = std::to_string(shm->size_bytes);
    record.facts[model::fact_keys::kShmFreeBytes] = std::to_string(shm->free_bytes);
  }
  const std::string netns_key = namespace_id(proc_dir, "net");
  auto interfaces = memo.interfaces.find(netns_key);
  if (interfaces == memo.interfaces.end() || netns_key.empty()) {
    interfaces =
        memo.interfaces.insert_or_assign(netns_key, facts::network_interfaces(proc_dir)).first;
  }
  // The TCP tables and descriptors the capture read for the process's sockets, else now.
  const auto tables = memo.sockets->of(record.pid, /*tcp=*/true);
  std::set<std::uint64_t> held;
  if (const auto listed = memo.sockets->held_by(record.pid); listed->has_value()) {
    for (const auto& [fd, inode] : **listed) held.insert(inode);
  }
  for (auto& [key, value] :
       facts::network_facts(interfaces->second, tables->tcp, tables->tcp_notes, held)
           .facts(record.environment)) {
    record.facts[key] = std::move(value);
  }
  collect_cache_facts(record, sources.cache_env, memo);
  for (const auto& [key, value] : memo.gpu) record.facts[key] = value;
}

// A parent of ranks that holds no group itself (torchrun's agent, a torch.multiprocessing.spawn
// parent, an API server) is their launcher, never a rank, whatever its logs say: the ranks'
// lines land in the parent's stdout too.
void mark_launchers(std::vector<model::ProcessRecord>& records) {
  std::set<pid_t> parents_of_ranks;
  for (const auto& r : records) {
    if (r.identity.role == model::ProcessRole::kRank) parents_of_ranks.insert(r.ppid);
  }
  for (auto& r : records) {
    if (!parents_of_ranks.count(r.pid)) continue;
    const bool holds_group = r.dump && r.dump->distributed && r.dump->distributed->rank;
    const auto source = r.identity.source;
    const bool env_rank = source == model::IdentitySource::kEnv ||
                          source == model::IdentitySource::kMemoryEnv ||
                          source == model::IdentitySource::kMemoryInitArguments;
    if (holds_group || env_rank) continue;
    r.identity.role = model::ProcessRole::kLauncher;
    r.identity.rank.reset();
    r.identity.source = model::IdentitySource::kNone;
    r.identity.sources.clear();
  }
}

// Children that inherited a rank's identity (worker pools, subprocesses) are its helpers.
void mark_helpers(std::vector<model::ProcessRecord>& records) {
  std::map<pid_t, const model::ProcessRecord*> by_pid;
  for (const auto& r : records) by_pid[r.pid] = &r;
  for (auto& r : records) {
    const auto parent = by_pid.find(r.ppid);
    if (parent == by_pid.end() || parent->second->identity.role != model::ProcessRole::kRank)
      continue;
    const auto& p = parent->second->identity;
    const bool same_rank = r.identity.rank == p.rank && r.identity.job == p.job;
    if (same_rank && r.identity.title.empty()) {
      r.helper_of = r.ppid;
      r.identity.role = model::ProcessRole::kHelper;
    }
  }
}

// Each rank's newest flight-recorder dump, fresh ones first asked for when the options say so:
// every rank is asked, then all are waited for together (one timeout for the node).
void collect_flight_records(model::NodeSnapshot& node,
                            const std::vector<std::map<std::string, std::string>>& env,
                            const NodeCaptureOptions& options) {
  const auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const auto root = [](const model::ProcessRecord& r) {
    return "/proc/" + std::to_string(r.pid) + "/root";
  };
  // The rank's user: the only owner besides root whose fifo root writes to and whose dumps it
  // reads (the paths come from the rank's environment and /tmp).
  std::vector<std::optional<uid_t>> owners(node.processes.size());
  for (std::size_t i = 0; i < node.processes.size(); ++i) {
    const auto& r = node.processes[i];
    if (r.identity.role != model::ProcessRole::kRank || !r.identity.rank) continue;
    if (const auto status = proc::ProcessFs(r.pid).task_status(r.pid)) {
      owners[i] = status->effective_uid;
    }
  }
  std::vector<std::size_t> asked;
  const std::int64_t since = now_ns() - 10'000'000;  // file times have a granularity
  for (std::size_t i = 0; options.evidence.trigger_flight_dumps && i < node.processes.size(); ++i) {
    auto& r = node.processes[i];
    if (r.identity.role != model::ProcessRole::kRank || !r.identity.rank) continue;
    const auto error =
        owners[i] ? collectives::request_flight_dump(root(r), env[i], *r.identity.rank, *owners[i])
                  : "the rank's user is unknown (its /proc status is gone)";
    r.facts[model::fact_keys::kFlightRecorderTrigger] =
        error.empty() ? "requested" : "not requested: " + error;
    if (error.empty()) asked.push_back(i);
  }
  const auto deadline = std::chrono::steady_clock::now() + options.flight_dump_timeout;
  for (std::size_t i : asked) {
    auto& r = node.processes[i];
    while (!collectives::flight_dump_written_since(root(r), env[i], *r.identity.rank, since) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!collectives::flight_dump_written_since(root(r), env[i], *r.identity.rank, since)) {
      r.facts[model::fact_keys::kFlightRecorderTrigger] =
          "requested, no new dump within " + std::to_string(options.flight_dump_timeout.count()) +
          " ms";
    }
  }
  for (std::size_t i = 0; i < node.processes.size(); ++i) {
    auto& r = node.processes[i];
    if (r.identity.role != model::ProcessRole::kRank || !r.identity.rank || !owners[i]) continue;
    r.flight_record = collectives::read_flight_record(root(r), env[i], *r.identity.rank, *owners[i],
                                                      now_ns(), options.flight_dump_stale_after);
  }
}

// NCCL's RAS service, once per network namespace whose ranks map NCCL >= 2.24 (RAS exists from
// 2.24): the findings on each of those ranks, the report itself on the first one.
void collect_nccl_ras(model::NodeSnapshot& node,
                      const std::vector<std::map<std::string, std::string>>& env) {
  std::map<std::string, std::vector<std::size_t>> by_netns;
  for (std::size_t i = 0; i < node.processes.size(); ++i) {
    const auto& r = node.processes[i];
    const auto nccl = r.facts.find(model::fact_keys::kVersionNccl);
    if (r.identity.role != model::ProcessRole::kRank || nccl == r.facts.end() ||
        model::compare_versions(nccl->second, "2.24") < 0) {
      continue;
    }
    by_netns[namespace_id("/proc/" + std::to_string(r.pid), "net")].push_back(i);
  }
  constexpr std::size_t kMaxReport = 64 * 1024;
  for (const auto& [ns, members] : by_netns) {
    auto& first = node.processes[members.front()];
    const auto endpoint = collectives::ras_endpoint(env[members.front()]);
    const auto reply =
        collectives::query_ras(endpoint, std::chrono::milliseconds(3000), 2, first.pid);
    std::string summary;
    auto status = model::RasStatus::kUnavailable;
    if (!reply.error.empty() && reply.report.empty()) {
      summary = "unavailable at " + endpoint.text() + ": " + reply.error;
    } else {
      const auto ras = collectives::summarize_ras(reply);
      summary = ras.describe();
      status = ras.status();
    }
    for (std::size_t i : members) {
      node.processes[i].facts[model::fact_keys::kNcclRas] = summary;
      node.processes[i].facts[model::fact_keys::kNcclRasStatus] = model::to_string(status);
    }
    if (!reply.report.empty()) {
      first.facts[model::fact_keys::kNcclRasReport] = reply.report.substr(0, kMaxReport);
    }
  }
}

// The keys (and barrier counters) a rank's waiting thread waits for, from its frames' locals.
struct AwaitedKeys {
  std::vector<std::string> keys;
  std::vector<std::string> counters;
};
AwaitedKeys awaited_store_keys(const model::ProcessDump& dump) {
  AwaitedKeys out;
  for (const auto& thread : dump.threads) {
    const auto point = waits::classify_thread(thread);
    if (point.kind != waits::WaitKind::kStore) continue;
    for (const char* name : {"keys", "key", "keys_to_wait"}) {
      if (const auto repr = point.local(name)) {
        out.keys = model::keys_in_repr(*repr);
        break;
      }
    }
    if (const auto counter = point.local("store_key")) {
      out.counters = model::keys_in_repr(*counter);
    }
    if (!out.keys.empty() || !out.counters.empty()) break;
  }
  return out;
}

// With --query-store: each rank that waits on store keys asks its store (MASTER_ADDR:PORT),
// read-only, which of them exist; one query per store, namespace and key set.
void collect_store_queries(model::NodeSnapshot& node,
                           const std::vector<std::map<std::string, std::string>>& env) {
  // endpoint + netns + keys → the answer (its description, the missing keys as JSON)
  std::map<std::string, std::pair<std::string, std::string>> asked;
  for (std::size_t i = 0; i < node.processes.size(); ++i) {
    auto& r = node.processes[i];
    if (r.identity.role != model::ProcessRole::kRank || !r.dump) continue;
    const auto awaited = awaited_store_keys(*r.dump);
    if (awaited.keys.empty() && awaited.counters.empty()) continue;
    auto& fact = r.facts[model::fact_keys::kStoreQuery];
    collectives::StoreQueryRequest request;
    try {
      request.endpoint = collectives::store_endpoint(env[i]);
    } catch (const Error& e) {
      fact = std::string("not queried: ") + e.what();
      continue;
    }
    const auto torch = r.facts.find(model::fact_keys::kVersionTorch);
    const auto protocol =
        torch == r.facts.end() ? std::nullopt : collectives::store_protocol_for(torch->second);
    if (!protocol) {
      fact = "not queried: the rank's torch version is unknown, so the store's protocol is";
      continue;
    }
    request.protocol = *protocol;
    request.keys = awaited.keys;
    request.counter_keys = awaited.counters;
    request.netns_pid = r.pid;
    std::string key =
        request.endpoint.text() + "|" + namespace_id("/proc/" + std::to_string(r.pid), "net");
    for (const auto& k : request.keys) key += "|" + k;
    for (const auto& k : request.counter_keys) key += "|#" + k;
    auto [it, fresh] = asked.emplace(key, std::pair<std::string, std::string>{});
    if (fresh) {
      const auto result = collectives::query_store(request);
      it->second.first = result.describe();
      if (result.error.empty()) it->second.second = nlohmann::json(result.missing()).dump();
    }
    fact = it->second.first;
    if (!it->second.second.empty())
      r.facts[model::fact_keys::kStoreMissingKeys] = it->second.second;
  }
}

// vLLM's broadcast rings (/dev/shm/psm_* segments mapped by several captured processes): each
// read once, its state told to every process that maps it, with the readers in rank order
// after the writer (the process waiting in acquire_write, else the lowest rank), as vLLM
// numbers its local readers.
bool waits_to_write(const model::ProcessRecord& r) {
  if (!r.dump) return false;
  for (const auto& thread : r.dump->threads) {
    if (waits::find_meaning(thread.frames, waits::FrameMeaning::kRingWrite) != nullptr) return true;
  }
  return false;
}

std::string ring_member(const model::ProcessRecord& r) {
  return r.identity.rank ? "rank " + std::to_string(*r.identity.rank)
                         : "pid " + std::to_string(r.pid);
}

void describe_ring(model::NodeSnapshot& node, std::vector<std::size_t> members,
                   const collectives::RingState& ring) {
  auto by_rank = [&](std::size_t a, std::size_t b) {
    const auto& x = node.processes[a].identity.rank;
    const auto& y = node.processes[b].identity.rank;
    return std::make_pair(x.value_or(1 << 30), node.processes[a].pid) <
           std::make_pair(y.value_or(1 << 30), node.processes[b].pid);
  };
  std::sort(members.begin(), members.end(), by_rank);
  std::size_t writer = members.front();
  for (std::size_t m : members) {
    if (waits_to_write(node.processes[m])) writer = m;
  }
  std::vector<std::size_t> readers;
  for (std::size_t m : members) {
    if (m != writer) readers.push_back(m);
  }
  const auto unread = ring.unread_by_reader();
  std::string text = ring.name + " (" + ring.layout.describe() + "; writer " +
                     ring_member(node.processes[writer]) + ", readers numbered in rank order): ";
  nlohmann::json lagging = nlohmann::json::array();
  std::string behind;
  for (std::size_t r = 0; r < unread.size(); ++r) {
    if (unread[r].empty()) continue;
    const std::string list = collectives::block_list(unread[r]);
    const std::string who =
        r < readers.size() ? ring_member(node.processes[readers[r]]) : "a process not captured";
    behind += (behind.empty() ? "" : "; ") + std::string("reader ") + std::to_string(r) + " (" +
              who + ") has not read block" + (unread[r].size() == 1 ? " " : "s ") + list;
    if (r < readers.size() && node.processes[readers[r]].identity.rank) {
      lagging.push_back(*node.processes[readers[r]].identity.rank);
    }
  }
  text += behind.empty() ? "every written block was read by every reader (the readers wait for "
                           "the writer)"
                         : behind + " (the writer waits for it when the ring is full)";
  for (std::size_t m : members) {
    auto& facts = node.processes[m].facts;
    facts[model::fact_keys::kShmRing] = text;
    facts[model::fact_keys::kShmRingStatus] = model::to_string(model::ShmRingStatus::kOk);
    facts[model::fact_keys::kShmRingLaggingRanks] = lagging.dump();
    if (node.processes[writer].identity.rank) {
      facts[model::fact_keys::kShmRingWriterRank] =
          std::to_string(*node.processes[writer].identity.rank);
    }
  }
}

void collect_shm_rings(model::NodeSnapshot& node,
                       const std::map<std::size_t, std::vector<proc::Mapping>>& shm_maps) {
  struct Segment {
    std::vector<std::size_t> members;
    proc::Mapping mapping;  // the first member's
  };
  std::map<std::pair<std::string, std::uint64_t>, Segment> segments;  // (device, inode)
  for (const auto& [i, mappings] : shm_maps) {
    std::set<std::uint64_t> seen;
    for (const auto& m : mappings) {
      if (!seen.insert(m.inode).second) continue;
      auto& segment = segments[{m.device, m.inode}];
      if (segment.members.empty()) segment.mapping = m;
      segment.members.push_back(i);
    }
  }
  for (auto& [id, segment] : segments) {
    if (segment.members.size() < 2) continue;  // a ring has a writer and readers
    const auto& first = node.processes[segment.members.front()];
    try {
      const auto ring = collectives::read_ring(first.pid, segment.mapping.start,
                                               segment.mapping.end, segment.mapping.path,
                                               static_cast<int>(segment.members.size()) - 1);
      describe_ring(node, segment.members, ring);
    } catch (const Error& e) {
      for (std::size_t m : segment.members) {
        auto& facts = node.processes[m].facts;
        facts[model::fact_keys::kShmRing] = std::string("not recognised: ") + e.what();
        facts[model::fact_keys::kShmRingStatus] =
            model::to_string(model::ShmRingStatus::kUnrecognised);
      }
    }
  }
}

}  // namespace

std::vector<pid_t> discover_processes() {
  std::vector<pid_t> found;
  const pid_t self = ::getpid();
  for (pid_t pid : all_pids()) {
    if (pid == self) continue;
    const auto stat = proc::ProcessFs(pid).task_stat(pid);
    if (!stat || (stat->flags & proc::kPfKthread) || stat->state == 'Z') continue;
    const std::string cmdline = command_line(pid);
    if (identity::parse_title(cmdline) || is_python_executable(executable(pid))) {
      found.push_back(pid);
      continue;
    }
    const auto env = read_proc_file("/proc/" + std::to_string(pid) + "/environ", 1 << 20);
    if (env.text && identity::parse_environ_block(*env.text).count("RANK")) found.push_back(pid);
  }
  return found;
}

model::NodeSnapshot capture_node(const NodeCaptureOptions& options) {
  const auto begin = std::chrono::steady_clock::now();
  // Before the node's maps and modules fill the process (native::start_stop_watchdog says why).
  if (options.process.stacks != StackKinds::kPythonOnly) native::start_stop_watchdog();
  model::NodeSnapshot node;
  node.hostname = hostname();
  node.node_name = options.selection.node_name_or(node.hostname);
  node.capture_unix_ns = unix_now_ns();
  std::vector<pid_t> pids =
      options.selection.pids.empty() ? discover_processes() : options.selection.pids;
  std::sort(pids.begin(), pids.end());  // a process named twice is captured once
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  if (!options.selection.select.empty()) {
    RE2::Options quiet;
    quiet.set_log_errors(false);
    const RE2 pattern(options.selection.select, quiet);
    if (!pattern.ok()) {
      throw Error("--select " + options.selection.select + ": not a valid regular expression (" +
                  pattern.error() + ")");
    }
    std::erase_if(pids, [&](pid_t pid) { return !selected(pid, pattern); });
  }
  NodeFacts node_facts;
  node_facts.gpu = facts::gpu_topology().facts();
  // One module cache for the node's processes (the agent keeps its own across requests).
  CaptureOptions process_options = options.process;
  // asyncio tasks always: one pass over sys.modules when asyncio is not imported (about a
  // millisecond for torch's 1,500 modules), and the front end's view when it is.
  process_options.tasks = true;
  // Sockets always: the serving chain and the groups' identity pair processes by them.
  process_options.sockets = true;
  process_options.socket_tables = node_facts.sockets;
  if (!process_options.modules) process_options.modules = std::make_shared<elf::ModuleCache>();
  std::vector<std::map<std::string, std::string>> dump_env;    // per process, for its dumps
  std::map<std::size_t, std::vector<proc::Mapping>> shm_maps;  // per process: its psm_* segments
  // Processes are described and captured in parallel (each one wholly on one worker thread,
  // which is its tracer), then their facts are gathered in pid order.
  std::vector<model::ProcessRecord> records(pids.size());
  std::vector<FactSources> sources(pids.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < pids.size(); i = next++) {
      records[i] = describe_process(pids[i], sources[i], process_options.modules);
      for (const auto& m :
           sources[i].maps ? sources[i].maps->mappings() : std::vector<proc::Mapping>{}) {
        if (m.path.rfind("/dev/shm/psm_", 0) == 0) sources[i].shm_mappings.push_back(m);
      }
      try {
        records[i].dump = capture_process(pids[i], process_options, std::move(sources[i].maps));
      } catch (const Error& e) {
        records[i].error = e.what();  // reported, and the rest of the node still comes out
      }
    }
  };
  const std::size_t workers = std::min<std::size_t>(
      pids.size(), std::max(1u, std::min(4u, std::thread::hardware_concurrency())));
  std::vector<std::thread> threads;
  for (std::size_t w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  identify_from_own_logs(records);
  for (std::size_t i = 0; i < pids.size(); ++i) {
    dump_env.push_back(records[i].environment);
    if (auto home = sources[i].cache_env.find("HOME"); home != sources[i].cache_env.end()) {
      dump_env.back()["HOME"] = home->second;
    }
    if (!sources[i].shm_mappings.empty()) shm_maps[i] = std::move(sources[i].shm_mappings);
    collect_facts(records[i], std::move(sources[i]), node_facts);
    node.processes.push_back(std::move(records[i]));
  }
  for (auto& r : node.processes) identify_from_memory(r);
  mark_launchers(node.processes);
  mark_helpers(node.processes);
  // Engine cores, API servers and DP coordinators (a launcher of ranks may be an engine core).
  waits::assign_serving_roles(node.processes);
  collect_flight_records(node, dump_env, options);
  collect_nccl_ras(node, dump_env);
  if (options.evidence.query_store) collect_store_queries(node, dump_env);
  collect_shm_rings(node, shm_maps);
  if (!options.evidence.log_globs.empty()) {
    std::set<pid_t> wanted;
    for (const auto& r : node.processes) wanted.insert(r.pid);
    auto shared = identity::attribute_shared_logs(options.evidence.log_globs, wanted);
    for (auto& r : node.processes) {
      if (auto it = shared.find(r.pid); it != shared.end()) {
        r.logs.push_back(std::move(it->second));
        identify_from_logs(r);
      }
    }
  }
  node.capture_time = std::chrono::steady_clock::now() - begin;
  return node;
}

}  // namespace hangscope::capture

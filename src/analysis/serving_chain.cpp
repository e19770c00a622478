// The serving chain of a vLLM V1 or SGLang deployment: the API servers (asyncio programs whose
// request tasks await the engine's output), the engine cores (a synchronous busy loop that
// waits on its workers through vLLM's shared-memory broadcast ring), the DP coordinator, and
// the workers' job, whose wait-for graph leads from the worker the engine waits for to the
// rank that is stuck. The front-end verdict names that rank first (docs/analysis.md, "The
// serving chain").
#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "hangscope/analysis/analysis.h"
#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/address.h"
#include "hangscope/common/numbers.h"
#include "hangscope/common/text.h"
#include "hangscope/model/fact_keys.h"

namespace hangscope::analysis {
namespace {

using model::Frame;

struct FramePattern {
  std::string_view path;  // a fragment of co_filename
  std::vector<std::string_view> functions;
};

bool matches(const Frame& f, const FramePattern& p) {
  if (f.kind != Frame::Kind::kPython || f.file.find(p.path) == std::string::npos) return false;
  return p.functions.empty() ||
         std::find(p.functions.begin(), p.functions.end(), f.function) != p.functions.end();
}

template <typename Frames>
const Frame* find_frame(const Frames& frames, const std::vector<FramePattern>& patterns) {
  for (const auto& f : frames) {
    for (const auto& p : patterns) {
      if (matches(f, p)) return &f;
    }
  }
  return nullptr;
}

// A request in flight at the API server: its task's coroutine chain is in the engine client's
// generate (or the OpenAI handlers that iterate it), or SGLang's tokenizer manager.
const std::vector<FramePattern>& request_frames() {
  static const std::vector<FramePattern> patterns = {
      {"vllm/v1/engine/output_processor.py", {"get"}},  // RequestOutputCollector.get
      {"vllm/v1/engine/async_llm.py", {"generate", "encode"}},
      {"vllm/engine/async_llm_engine.py", {"generate", "encode"}},
      {"vllm/entrypoints/openai/serving_chat.py",
       {"create_chat_completion", "chat_completion_full_generator",
        "chat_completion_stream_generator"}},
      {"vllm/entrypoints/openai/serving_completion.py",
       {"create_completion", "completion_full_generator", "completion_stream_generator"}},
      {"vllm/entrypoints/openai/api_server.py", {"create_chat_completion", "create_completion"}},
      {"sglang/srt/managers/tokenizer_manager.py",
       {"_wait_one_response", "generate_request", "_handle_batch_request"}},
      // SGLang's handlers take the tokenizer manager's outputs from its async generator
      // (`await generate_request(...).__anext__()`, `async for`); the chain goes on into it.
      {"sglang/srt/entrypoints/http_server.py",
       {"generate_request", "openai_v1_completions", "openai_v1_chat_completions", "v1_completions",
        "v1_chat_completions"}},
      {"sglang/srt/entrypoints/openai/serving_base.py", {"handle_request"}},
      {"sglang/srt/entrypoints/openai/serving_chat.py",
       {"_handle_non_streaming_request", "_generate_chat_stream"}},
      {"sglang/srt/entrypoints/openai/serving_completions.py",
       {"_handle_non_streaming_request", "_generate_completion_stream"}},
  };
  return patterns;
}

// The engine client's frame of a request task: where it awaits the engine (for people).
const std::vector<FramePattern>& client_frames() {
  static const std::vector<FramePattern> patterns = {
      {"vllm/v1/engine/async_llm.py", {"generate", "encode"}},
      {"vllm/engine/async_llm_engine.py", {"generate", "encode"}},
      {"sglang/srt/managers/tokenizer_manager.py", {"_wait_one_response", "generate_request"}},
  };
  return patterns;
}

// The task that pulls the engine's outputs into the request queues.
const std::vector<FramePattern>& output_handler_frames() {
  static const std::vector<FramePattern> patterns = {
      {"vllm/v1/engine/async_llm.py", {"output_handler"}},
      {"vllm/v1/engine/core_client.py", {"get_output_async", "process_outputs_socket"}},
      {"sglang/srt/managers/tokenizer_manager.py", {"handle_loop"}},
  };
  return patterns;
}

// Thread frames of an API server's event loop.
const std::vector<FramePattern>& api_thread_frames() {
  static const std::vector<FramePattern> patterns = {
      {"vllm/entrypoints/openai/api_server.py", {}},
      {"vllm/entrypoints/launcher.py", {"serve_http"}},
      {"sglang/srt/entrypoints/http_server.py", {}},
      {"/uvicorn/", {}},
  };
  return patterns;
}

// SGLang's launcher on a node with --node-rank >= 1: it started the node's schedulers and only
// serves /health (its stack passes through http_server.py's launch_server): no API server.
const std::vector<FramePattern>& health_check_only_frames() {
  static const std::vector<FramePattern> patterns = {
      {"sglang/srt/utils", {"launch_dummy_health_check_server"}},
  };
  return patterns;
}

// `vllm serve`'s own process: the API server when it serves in-process (uvloop.run(run_server)),
// a launcher of API servers and engine cores when it waits for them.
const std::vector<FramePattern>& serve_command_frames() {
  static const std::vector<FramePattern> patterns = {{"vllm/entrypoints/cli/serve.py", {}}};
  return patterns;
}
const std::vector<FramePattern>& serve_launcher_frames() {
  static const std::vector<FramePattern> patterns = {
      {"vllm/entrypoints/cli/serve.py",
       {"run_multi_api_server", "wait_for_completion_or_failure", "run_headless"}},
  };
  return patterns;
}

// The engine core's busy loop (vLLM V1, synchronous: its thread stack shows the edge).
const std::vector<FramePattern>& busy_loop_frames() {
  static const std::vector<FramePattern> patterns = {
      {"vllm/v1/engine/core.py", {"run_busy_loop", "run_engine_core"}},
  };
  return patterns;
}

// A step in flight: the busy loop inside the engine's step, waiting for the executor.
const std::vector<FramePattern>& step_frames() {
  static const std::vector<FramePattern> patterns = {
      {"vllm/v1/engine/core.py",
       {"step", "step_with_batch_queue", "_process_engine_step", "execute_dummy_batch",
        "execute_model"}},
      {"vllm/v1/executor/", {}},
  };
  return patterns;
}

const std::vector<FramePattern>& coordinator_frames() {
  static const std::vector<FramePattern> patterns = {{"vllm/v1/engine/coordinator.py", {}}};
  return patterns;
}

bool title_has(const model::ProcessRecord& p, std::string_view word) {
  return p.identity.title.find(word) != std::string::npos;
}

bool any_thread_has(const model::ProcessRecord& p, const std::vector<FramePattern>& patterns) {
  if (!p.dump) return false;
  for (const auto& t : p.dump->threads) {
    if (find_frame(t.python_frames, patterns) != nullptr) return true;
  }
  return false;
}

const model::ThreadDump* busy_loop_thread(const model::ProcessRecord& p) {
  if (!p.dump) return nullptr;
  for (const auto& t : p.dump->threads) {
    if (find_frame(t.python_frames, busy_loop_frames()) != nullptr) return &t;
  }
  return nullptr;
}

bool has_request_tasks(const model::ProcessRecord& p) {
  if (!p.dump) return false;
  for (const auto& task : p.dump->tasks) {
    if (find_frame(task.coroutine, request_frames()) ||
        find_frame(task.coroutine, output_handler_frames())) {
      return true;
    }
  }
  return false;
}

std::string place(const Frame& f) {
  return (f.qualname.empty() ? f.function : f.qualname) + " (" + waits::short_path(f.file) + ":" +
         std::to_string(f.line) + ")";
}

std::string who(const std::string& node, const model::ProcessRecord& p) {
  return node + " pid " + std::to_string(p.pid);
}

// Every sample of one process (same node, pid and start time), oldest first.
std::vector<std::pair<std::int64_t, const model::ProcessRecord*>> history_of(
    const model::Bundle& bundle, const std::string& node, const model::ProcessRecord& latest) {
  std::vector<std::tuple<int, std::int64_t, const model::ProcessRecord*>> found;
  for (const auto& s : bundle.snapshots) {
    if (s.node_name != node) continue;
    for (const auto& p : s.processes) {
      if (p.pid == latest.pid && p.start_time_ticks == latest.start_time_ticks) {
        found.emplace_back(s.sample_index, s.capture_unix_ns, &p);
      }
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  std::vector<std::pair<std::int64_t, const model::ProcessRecord*>> out;
  for (const auto& [index, time, p] : found) out.emplace_back(time, p);
  return out;
}

// The progress of a process's thread `tid` across its samples, measured as a rank's.
void measure(const model::Bundle& bundle, const std::string& node, const waits::WaitPoint& wait,
             ServingProcess& s) {
  RankEntry pseudo;
  pseudo.node = node;
  pseudo.pid = s.process->pid;
  pseudo.wait = wait;
  for (const auto& [time, p] : history_of(bundle, node, *s.process)) {
    pseudo.history.push_back(p);
    pseudo.sample_times_ns.push_back(time);
  }
  const Progress progress = progress_of(pseudo);
  s.progressing = progress.progressing;
  s.progress = progress.detail;
}

// A task's innermost coroutine frame that is not asyncio's own code (its innermost frame when
// all are); nullptr when it has none.
const Frame* innermost_own_frame(const model::AsyncTask& task) {
  for (const auto& f : task.coroutine) {
    if (!model::in_asyncio(f)) return &f;
  }
  return task.coroutine.empty() ? nullptr : &task.coroutine.front();
}

// The request tasks of an API server, and which of them were pending in its first sample too.
void read_tasks(const model::Bundle& bundle, const std::string& node, ServingProcess& s) {
  const auto& dump = s.process->dump;
  if (!dump) return;
  s.tasks = dump->tasks.size();
  const auto history = history_of(bundle, node, *s.process);
  std::set<std::uint64_t> first_pending;
  const bool several = history.size() > 1;
  if (several && history.front().second->dump) {
    for (const auto& t : history.front().second->dump->tasks) {
      if (t.state == model::AsyncTask::State::kPending) first_pending.insert(t.address);
    }
  }
  std::map<std::string, std::size_t> places;
  for (const auto& task : dump->tasks) {
    if (task.state != model::AsyncTask::State::kPending) continue;
    if (find_frame(task.coroutine, output_handler_frames()) != nullptr) {
      ++s.output_handlers;
      continue;
    }
    if (find_frame(task.coroutine, request_frames()) == nullptr) continue;
    ++s.pending_requests;
    if (!several || first_pending.count(task.address)) ++s.stuck_requests;
    // Where it waits: the innermost frame outside asyncio (`awaits` names asyncio's: Event.wait),
    // and the engine client's frame when that is another.
    const Frame* inner = innermost_own_frame(task);
    std::string where = inner == nullptr ? "?" : place(*inner);
    if (const auto* f = find_frame(task.coroutine, client_frames()); f != nullptr && f != inner) {
      where += " <- " + place(*f);
    }
    if (!task.awaits.empty()) where += ", awaiting " + task.awaits;
    ++places[where];
  }
  std::size_t most = 0;
  for (const auto& [where, count] : places) {
    if (count > most) {
      most = count;
      s.requests_wait_in = where;
    }
  }
}

// The engine core's busy loop: where it waits, whether a step is in flight or it idles.
void read_engine(const model::Bundle& bundle, const std::string& node, ServingProcess& s) {
  const auto* thread = busy_loop_thread(*s.process);
  if (thread == nullptr) {
    // A read of a spinning busy loop caught mid-change may miss its outer frames: the newest
    // sample of the process that shows the loop stands for it.
    const auto history = history_of(bundle, node, *s.process);
    for (auto it = history.rbegin(); it != history.rend() && thread == nullptr; ++it) {
      if ((thread = busy_loop_thread(*it->second)) != nullptr) s.process = it->second;
    }
  }
  if (thread == nullptr) {
    s.activity = "unknown";
    if (s.process->dump) s.wait = waits::process_wait_point(*s.process->dump);
    s.waits_in = s.wait.describe();
    return;
  }
  s.wait = waits::classify_thread(*thread);
  s.wait.tid = thread->tid;
  const bool waits = s.wait.kind != waits::WaitKind::kCpu && s.wait.kind != waits::WaitKind::kOther;
  // Idle means waiting for requests (its input queue, a ZMQ poll); a busy loop that waits on
  // peers (a DP engine core in its DP group's all-reduce) is blocked, a step in flight or not.
  if (find_frame(thread->python_frames, step_frames()) != nullptr ||
      waits::waits_on_peers(s.wait.kind)) {
    s.activity = waits ? "blocked" : "working";
  } else {
    s.activity = waits ? "idle" : "working";
  }
  s.waits_in = s.wait.describe();
  // The executor's call that waits (get_response in multiproc_executor.py), when it is not
  // already the described frame.
  for (const auto& f : thread->python_frames) {
    if (f.file.find("vllm/v1/executor/") == std::string::npos) continue;
    if (!s.wait.python || s.wait.python->file != f.file || s.wait.python->line != f.line) {
      s.waits_in += " <- " + place(f);
    }
    break;
  }
  measure(bundle, node, s.wait, s);
}

std::optional<int> rank_in_repr(const std::string& text) {
  if (text.size() > 4096) return std::nullopt;
  static const std::regex rank(R"((?:^|[\s(,])rank=(\d+))");
  std::smatch m;
  if (!std::regex_search(text, m, rank)) return std::nullopt;
  return to_int(m[1].str());
}

// The workers the engine core waits for directly: the worker handle `w` of get_response
// (multiproc_executor.py: a dataclass whose repr says `rank=N`), collective_rpc's
// `unique_reply_rank`, the ranks behind on the broadcast ring it writes; else every worker.
void awaited_workers(const ServingProcess& engine, const Job& job, ServingChain& chain) {
  const auto* thread = busy_loop_thread(*engine.process);
  if (thread != nullptr && engine.activity == "blocked") {
    for (const auto& f : thread->python_frames) {
      for (const auto& [name, value] : f.locals) {
        std::optional<int> rank;
        std::string how;
        if (f.function == "get_response" && name == "w") {
          rank = rank_in_repr(value);
          how = "the worker handle `w` of get_response";
        } else if (f.function == "collective_rpc" && name == "unique_reply_rank") {
          rank = to_int(value);
          how = "collective_rpc's `unique_reply_rank`";
        }
        if (rank && job.find(*rank) != nullptr) {
          chain.awaited.insert(*rank);
          chain.awaited_reason = how;
          return;
        }
      }
    }
    if (engine.wait.kind == waits::WaitKind::kRing && engine.wait.primitive == "acquire_write") {
      const auto it = engine.process->facts.find(model::fact_keys::kShmRingLaggingRanks);
      if (it != engine.process->facts.end()) {
        const auto lagging = nlohmann::json::parse(it->second, nullptr, false);
        if (lagging.is_array()) {
          for (const auto& r : lagging) {
            if (r.is_number_integer()) chain.awaited.insert(r.get<int>());
          }
        }
        if (!chain.awaited.empty()) {
          chain.awaited_reason = "the broadcast ring's readers that are behind";
          return;
        }
      }
    }
  }
  chain.awaited = job.present;
  chain.awaited_reason = "every worker of the job (the engine core's locals do not say which)";
}

// Where the workers' wait-for graph ends, from the ranks in `from`.
RankSet follow_to_roots(const Job& job, const RankSet& from) {
  RankSet roots, seen;
  std::vector<int> frontier = from.list();
  while (!frontier.empty()) {
    const int r = frontier.back();
    frontier.pop_back();
    if (seen.contains(r)) continue;
    seen.insert(r);
    const auto* e = job.find(r);
    if (e == nullptr || e->state != RankState::kWaiting || e->waits_for.empty()) {
      roots.insert(r);
      continue;
    }
    for (const auto* next : job.entries_in(e->waits_for)) frontier.push_back(*next->rank);
    roots.insert(e->waits_for - job.present);  // missing ranks end the chain
  }
  return roots;
}

const Job* find_job(const std::vector<Job>& jobs, const std::string& key) {
  for (const auto& j : jobs) {
    if (j.key == key && !j.ranks.empty()) return &j;
  }
  return nullptr;
}

// The job of the ranks whose parent is `parent` on its node (most of them), "" when none.
std::string job_of_children(const std::vector<Job>& jobs, const std::string& node, pid_t parent) {
  std::map<std::string, int> count;
  for (const auto& j : jobs) {
    for (const auto& r : j.ranks) {
      const auto* p = r.latest();
      if (p != nullptr && r.node == node && p->ppid == parent) ++count[j.key];
    }
  }
  std::string best;
  int most = 0;
  for (const auto& [key, n] : count) {
    if (n > most) best = key, most = n;
  }
  return best;
}

// The sockets of one process, indexed to find the other ends of another process's sockets.
struct SocketIndex {
  std::string node;
  std::map<std::uint64_t, const model::Socket*> unix_by_inode;
  std::map<std::pair<std::string, std::string>, const model::Socket*> tcp_by_ends;  // established
  std::set<std::string> listening_ports;                                            // tcp

  SocketIndex(std::string node_name, const model::ProcessRecord& p) : node(std::move(node_name)) {
    if (!p.dump) return;
    for (const auto& s : p.dump->sockets) {
      if (s.family == model::Socket::Family::kUnix) {
        unix_by_inode[s.inode] = &s;
      } else if (s.state == "established") {
        tcp_by_ends[{s.local, s.remote}] = &s;
      } else if (s.state == "listen") {
        listening_ports.insert(s.local.substr(s.local.rfind(':') + 1));
      }
    }
  }
  bool empty() const { return unix_by_inode.empty() && tcp_by_ends.empty(); }
};

std::string port_of(const std::string& endpoint) {
  return endpoint.substr(endpoint.rfind(':') + 1);
}

// How process `p` on `node` talks to the indexed process: a unix socket whose peer is one of
// the index's ("over ipc:///tmp/…", the bound name of either end), or a TCP connection whose
// two ends they hold ("over tcp ADDRESS:PORT", the listening end's address; loopback only on
// one node); "" when no socket of `p` is the other end of one of the index's.
std::string connection(const std::string& node, const model::ProcessRecord& p,
                       const SocketIndex& other) {
  if (!p.dump || other.empty()) return "";
  const SocketIndex own(node, p);
  for (const auto& s : p.dump->sockets) {
    if (s.family == model::Socket::Family::kUnix) {
      const auto peer = other.unix_by_inode.find(s.peer_inode);
      if (node != other.node || s.peer_inode == 0 || peer == other.unix_by_inode.end()) continue;
      const std::string& name = s.path.empty() ? peer->second->path : s.path;
      if (name.empty()) {
        return "over a unix socket pair (inodes " + std::to_string(s.inode) + " and " +
               std::to_string(s.peer_inode) + ")";
      }
      return name.front() == '@' ? "over unix socket " + name : "over ipc://" + name;
    }
    if (s.state != "established" || !other.tcp_by_ends.count({s.remote, s.local})) continue;
    if (node != other.node && (is_loopback_endpoint(s.local) || is_loopback_endpoint(s.remote)))
      continue;
    const bool own_listens = own.listening_ports.count(port_of(s.local)) > 0;
    return "over tcp " + (own_listens ? s.local : s.remote);
  }
  return "";
}

// The job whose ranks (most of them) are connected to the process through a socket pair, and
// how; "" when none is.
std::pair<std::string, std::string> job_of_sockets(const std::vector<Job>& jobs,
                                                   const std::string& node,
                                                   const model::ProcessRecord& p) {
  const SocketIndex index(node, p);
  if (index.empty()) return {};
  std::map<std::string, std::pair<int, std::string>> count;  // job → (ranks, one connection)
  for (const auto& j : jobs) {
    for (const auto& r : j.ranks) {
      const auto* q = r.latest();
      if (q == nullptr) continue;
      if (auto how = connection(r.node, *q, index); !how.empty()) {
        auto& [n, first] = count[j.key];
        if (n++ == 0) first = std::move(how);
      }
    }
  }
  std::pair<std::string, std::string> best;
  int most = 0;
  for (const auto& [key, found] : count) {
    if (found.first > most) best = {key, found.second}, most = found.first;
  }
  return best;
}

// The job whose ranks map the same broadcast ring as the process (the same ring fact).
std::string job_of_ring(const std::vector<Job>& jobs, const std::string& node,
                        const model::ProcessRecord& p) {
  const auto ring = p.facts.find(model::fact_keys::kShmRing);
  if (model::shm_ring_status(p.facts) != model::ShmRingStatus::kOk) return "";
  for (const auto& j : jobs) {
    for (const auto& r : j.ranks) {
      const auto* q = r.latest();
      if (q == nullptr || r.node != node) continue;
      const auto it = q->facts.find(model::fact_keys::kShmRing);
      if (it != q->facts.end() && it->second == ring->second) return j.key;
    }
  }
  return "";
}

std::string only_job(const std::vector<Job>& jobs) {
  std::string key;
  int with_ranks = 0;
  for (const auto& j : jobs) {
    if (j.ranks.empty()) continue;
    ++with_ranks;
    key = j.key;
  }
  return with_ranks == 1 ? key : "";
}

std::string label(const ServingProcess& s) {
  const std::string name = s.role == "api"      ? "API server"
                           : s.role == "engine" ? "engine core"
                                                : "DP coordinator";
  return name + " (" + who(s.node, *s.process) + (s.title.empty() ? "" : ", " + s.title) + ")";
}

// What an API server's request tasks and output handlers wait on: vLLM's engine core, SGLang's
// schedulers (requests) and detokenizer (outputs).
std::string api_link(const ServingProcess& a, const ServingChain& chain) {
  const bool sglang = chain.framework == "sglang";
  std::string out = label(a) + ": ";
  if (a.tasks == 0) {
    return out + "its asyncio tasks were not read (no request count); its event loop waits in " +
           (a.process->dump ? waits::process_wait_point(*a.process->dump).describe() : "?") +
           (a.link.empty() ? "" : "; " + a.link);
  }
  out += std::to_string(a.tasks) + " asyncio tasks, " + std::to_string(a.pending_requests) +
         " request task" + (a.pending_requests == 1 ? "" : "s") + " awaiting " +
         (sglang ? "the schedulers' output" : "the engine's output");
  if (a.pending_requests > 0) {
    out += " (" + std::to_string(a.stuck_requests) + " pending in every sample) in " +
           a.requests_wait_in;
  }
  out += "; " + std::to_string(a.output_handlers) + " output handler task" +
         (a.output_handlers == 1 ? "" : "s") + " pulling " +
         (sglang ? "the detokenizer's outputs" : "the engine core's outputs");
  if (!a.link.empty()) out += "; " + a.link;
  return out;
}

std::string engine_link(const ServingProcess& e, const ServingChain& chain) {
  std::string out = label(e) + ": " + e.activity;
  if (e.activity == "blocked") {
    out += ", a step in flight: waits in " + e.waits_in;
    if (!chain.awaited.empty()) {
      out += " for worker " + ranks_text(chain.awaited) + " (" + chain.awaited_reason + ")";
    }
  } else if (e.activity == "idle") {
    out += ": waits for input in " + e.waits_in;
  } else {
    out += ": " + e.waits_in;
  }
  if (!e.progress.empty()) out += "; " + e.progress;
  return out;
}

std::string root_what(const RankEntry& r) {
  switch (r.state) {
    case RankState::kRunning:
      return "is still working in " + r.wait.describe() + " (" + r.progress.detail + ")";
    case RankState::kWaiting:
      return "is stuck in " + r.wait.describe() +
             (r.progress.detail.empty() ? "" : " (" + r.progress.detail + ")");
    case RankState::kStopped:
      return "is stopped (state T: SIGSTOP, a debugger or job control)";
    case RankState::kUninterruptible:
      return "is in uninterruptible sleep (state D) in " + r.wait.describe();
    case RankState::kDead:
      return "is dead (exited or a zombie)";
    case RankState::kMissing:
      return "is missing: no node that answered runs it";
    case RankState::kUnknown:
      break;
  }
  return "is in an unknown state (not captured)";
}

// What the chain's ranks are called: SGLang's are its schedulers (sglang::scheduler_TP<r>), one
// per TP rank; vLLM's are the engine core's workers.
std::string rank_noun(const ServingChain& chain) {
  return chain.framework == "sglang" ? "scheduler" : "worker";
}

std::string capitalized(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

// The workers' part of the chain: each rank on the way from the awaited workers to the roots,
// grouped by what it waits for and where.
void worker_links(const Job& job, ServingChain& chain) {
  std::map<std::pair<std::string, RankSet>, std::set<int>> edges;
  RankSet seen;
  std::vector<int> frontier = chain.awaited.list();
  while (!frontier.empty()) {
    const int r = frontier.back();
    frontier.pop_back();
    if (seen.contains(r)) continue;
    seen.insert(r);
    const auto* e = job.find(r);
    if (e == nullptr || chain.roots.contains(r)) continue;
    edges[{e->wait.describe(), e->waits_for}].insert(r);
    for (const auto* next : job.entries_in(e->waits_for)) frontier.push_back(*next->rank);
  }
  for (const auto& [edge, ranks] : edges) {
    chain.links.push_back(rank_noun(chain) + " " + ranks_text(RankSet(ranks)) + " (job " + job.key +
                          ") " + (ranks.size() == 1 ? "waits" : "wait") + " for " +
                          ranks_text(edge.second) + " in " + edge.first);
  }
  for (const auto* e : job.entries_in(chain.roots)) {
    chain.links.push_back(rank_noun(chain) + " rank " + std::to_string(*e->rank) + " (" + e->node +
                          " pid " + std::to_string(e->pid) +
                          "): " + std::string(to_string(e->state)) + ", " + root_what(*e) +
                          " — where the chain ends");
  }
  if (const auto absent = chain.roots - job.present; !absent.empty()) {
    chain.links.push_back(rank_noun(chain) + " " + ranks_text(absent) + ": " +
                          std::string(to_string(job.missing_state)) + " — where the chain ends");
  }
}

void describe(const std::vector<Job>& jobs, ServingChain& chain) {
  for (const auto& a : chain.api_servers) chain.links.push_back(api_link(a, chain));
  for (const auto& c : chain.coordinators) {
    chain.links.push_back(label(c) + ": waits in " + c.wait.describe());
  }
  for (const auto& e : chain.engines) chain.links.push_back(engine_link(e, chain));
  if (const auto* job = find_job(jobs, chain.job); job != nullptr && !chain.job.empty()) {
    if (chain.engines.empty()) {
      chain.links.push_back("the API server awaits the ranks of job " + job->key + " (" +
                            chain.job_link + ")");
    }
    worker_links(*job, chain);
  }
}

}  // namespace

std::optional<std::string> serving_role(const Analysis& analysis,
                                        const model::ProcessRecord& process) {
  for (const auto& chain : analysis.serving) {
    for (const auto* list : {&chain.api_servers, &chain.engines, &chain.coordinators}) {
      for (const auto& s : *list) {
        if (s.process == &process) return s.role;
      }
    }
  }
  return std::nullopt;
}

std::string serving_note(const std::vector<ServingChain>& chains) {
  std::string out;
  for (const auto& chain : chains) {
    std::vector<std::string> parts;
    for (const auto& a : chain.api_servers) {
      if (a.tasks == 0) continue;
      parts.push_back("the API server (" + who(a.node, *a.process) + ") has " +
                      (a.pending_requests == 0 ? std::string("no request")
                                               : std::to_string(a.pending_requests) + " request" +
                                                     (a.pending_requests == 1 ? "" : "s")) +
                      " in flight");
    }
    for (const auto& e : chain.engines) {
      std::string text = "the engine core (" + who(e.node, *e.process) + ") is " + e.activity;
      if (e.progressing.value_or(false)) text += " and progresses (" + e.progress + ")";
      parts.push_back(text);
    }
    if (parts.empty()) continue;
    out += " Serving chain: ";
    for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
    out += ".";
  }
  return out;
}

bool ServingChain::tasks_read() const {
  return std::any_of(api_servers.begin(), api_servers.end(),
                     [](const ServingProcess& a) { return a.tasks > 0; });
}

std::vector<ServingChain> serving_chains(const model::Bundle& bundle, const std::vector<Job>& jobs,
                                         const std::vector<OtherProcess>& others) {
  std::vector<ServingProcess> apis, engines, coordinators;
  std::set<std::pair<std::string, pid_t>> engine_parents;
  for (const auto& o : others) {
    const auto& p = *o.process;
    if (title_has(p, "EngineCore") || p.identity.role == "engine" || busy_loop_thread(p)) {
      engine_parents.insert({o.node, p.ppid});
    }
  }
  for (const auto& o : others) {
    const auto& p = *o.process;
    ServingProcess s;
    s.node = o.node;
    s.process = &p;
    s.title = p.identity.title;
    s.wait = o.wait;
    if (title_has(p, "EngineCore") || p.identity.role == "engine" || busy_loop_thread(p)) {
      s.role = "engine";
      read_engine(bundle, o.node, s);
      engines.push_back(std::move(s));
    } else if (title_has(p, "DPCoordinator") || p.identity.role == "coordinator" ||
               any_thread_has(p, coordinator_frames())) {
      s.role = "coordinator";
      coordinators.push_back(std::move(s));
    } else if (any_thread_has(p, health_check_only_frames())) {
      continue;
    } else if (title_has(p, "APIServer") || p.identity.role == "api" || has_request_tasks(p) ||
               any_thread_has(p, api_thread_frames()) ||
               (engine_parents.count({o.node, p.pid}) &&
                ((p.dump && !p.dump->tasks.empty()) ||
                 (any_thread_has(p, serve_command_frames()) &&
                  !any_thread_has(p, serve_launcher_frames()))))) {
      s.role = "api";
      read_tasks(bundle, o.node, s);
      apis.push_back(std::move(s));
    }
  }
  if (apis.empty() && engines.empty()) return {};
  // The engines' workers: connected to it by a socket, by parent pid, by a shared broadcast
  // ring, else the only job.
  std::map<std::string, ServingChain> by_job;
  const auto chain_for = [&](const std::string& job, const std::string& link) -> ServingChain& {
    auto& chain = by_job[job];
    chain.job = job;
    if (chain.job_link.empty()) chain.job_link = link;
    return chain;
  };
  for (auto& e : engines) {
    auto [job, link] = job_of_sockets(jobs, e.node, *e.process);
    if (!job.empty()) {
      link = "ranks connected to the engine core " + link;
    } else if (!(job = job_of_children(jobs, e.node, e.process->pid)).empty()) {
      link = "the engine core's child processes";
    } else if (!(job = job_of_ring(jobs, e.node, *e.process)).empty()) {
      link = "ranks that map the engine core's broadcast ring in /dev/shm";
    } else if (!(job = only_job(jobs)).empty()) {
      link = "the only job captured (assumed)";
    }
    chain_for(job, link).engines.push_back(std::move(e));
  }
  for (auto& a : apis) {
    // Its engines: those it is connected to through a socket pair (vLLM's ZMQ ipc:// or tcp://
    // sockets to each engine core), which parent pids cannot tell apart with several API
    // servers and engine cores; else its children, or siblings (API servers and engine cores
    // started by one `vllm serve`); an API server linked to none serves every chain (engines
    // elsewhere).
    const SocketIndex api_sockets(a.node, *a.process);
    std::vector<std::pair<ServingChain*, std::string>> linked;  // chain, how
    for (auto& [job, chain] : by_job) {
      std::vector<std::string> over;
      for (const auto& e : chain.engines) {
        if (auto how = connection(e.node, *e.process, api_sockets); !how.empty()) {
          over.push_back("engine core " + who(e.node, *e.process) + " " + how);
        }
      }
      if (!over.empty()) linked.emplace_back(&chain, "connected to " + join(over, ", ", 8));
    }
    const bool by_socket = !linked.empty();
    for (auto& [job, chain] : by_job) {
      if (by_socket) break;
      for (const auto& e : chain.engines) {
        const bool child = e.process->ppid == a.process->pid;
        if (e.node == a.node && (child || e.process->ppid == a.process->ppid)) {
          linked.emplace_back(&chain, std::string(child ? "parent" : "sibling") +
                                          " of engine core " + who(e.node, *e.process) +
                                          " (no socket between them captured)");
          break;
        }
      }
    }
    for (auto& [chain, how] : linked) {
      ServingProcess linked_api = a;
      linked_api.link = how;
      chain->api_servers.push_back(std::move(linked_api));
    }
    if (!linked.empty()) continue;
    if (!by_job.empty()) {
      for (auto& [job, chain] : by_job) chain.api_servers.push_back(a);
      continue;
    }
    // No engine core: the ranks it talks to or started (SGLang's schedulers), else the only job.
    auto [job, link] = job_of_sockets(jobs, a.node, *a.process);
    if (!job.empty()) {
      link = "ranks connected to the API server " + link;
    } else if (!(job = job_of_children(jobs, a.node, a.process->pid)).empty()) {
      link = "the API server's child processes";
    } else if (!(job = only_job(jobs)).empty()) {
      link = "the only job captured (assumed)";
    }
    chain_for(job, link).api_servers.push_back(a);
  }
  std::vector<ServingChain> out;
  for (auto& [key, chain] : by_job) {
    chain.coordinators = coordinators;
    for (const auto& p : chain.api_servers) {
      if (p.process->cmdline.find("sglang") != std::string::npos) chain.framework = "sglang";
    }
    if (chain.framework.empty()) chain.framework = "vllm";
    if (const auto* job = find_job(jobs, chain.job); job != nullptr && !chain.job.empty()) {
      if (!chain.engines.empty()) {
        awaited_workers(chain.engines.front(), *job, chain);
      } else {
        chain.awaited = job->present;
        chain.awaited_reason = "the API server's ranks";
      }
      chain.roots = follow_to_roots(*job, chain.awaited);
    }
    describe(jobs, chain);
    out.push_back(std::move(chain));
  }
  return out;
}

namespace {

bool stuck(const RankEntry& r) {
  switch (r.state) {
    case RankState::kStopped:
    case RankState::kDead:
    case RankState::kMissing:
    case RankState::kUninterruptible:
      return true;
    default:
      return r.progress.progressing.has_value() && !*r.progress.progressing;
  }
}

// The front of the summary: what the API servers' requests do.
std::string front_text(const ServingChain& chain, const std::string& awaited) {
  std::size_t stuck_requests = 0;
  for (const auto& a : chain.api_servers) stuck_requests += a.stuck_requests;
  if (stuck_requests == 0) return "";
  const auto& a = chain.api_servers.front();
  return (chain.api_servers.size() == 1 ? "the API server (" + who(a.node, *a.process) + ") has "
                                        : std::string("the API servers have ")) +
         std::to_string(stuck_requests) + " request task" + (stuck_requests == 1 ? "" : "s") +
         " awaiting " + awaited;
}

// The best verdict so far about the job's ranks among `roots`.
const Verdict* root_verdict(const std::vector<Verdict>& found, const std::string& job,
                            const RankSet& roots) {
  const Verdict* best = nullptr;
  for (const auto& v : found) {
    if (v.job != job || v.kind != VerdictKind::kGeneric || !v.diverged_ranks.intersects(roots)) {
      continue;
    }
    if (best == nullptr || v.confidence > best->confidence) best = &v;
  }
  return best;
}

std::string engine_wait_text(const ServingProcess& e) {
  if (e.wait.kind == waits::WaitKind::kRing && e.wait.python) {
    return "the shm broadcast ring (" + e.wait.python->text() + ")";
  }
  return e.waits_in;
}

Verdict base_verdict(const ServingChain& chain) {
  Verdict v;
  v.id = verdict_ids::kServingStalled;
  v.job = chain.job;
  v.evidence.push_back("serving chain (" + chain.framework + "), front first:");
  for (const auto& l : chain.links) v.evidence.push_back("  " + l);
  return v;
}

// Requests stuck behind a worker rank: the engine core (or, without one, the API server) waits
// on the workers, and their graph ends at a rank that does not move.
std::optional<Verdict> worker_verdict(const ServingChain& chain, const Job& job,
                                      const std::vector<Verdict>& found) {
  const ServingProcess* engine = nullptr;
  for (const auto& e : chain.engines) {
    if (e.activity == "blocked" && !e.progressing.value_or(false)) engine = &e;
  }
  std::size_t stuck_requests = 0;
  for (const auto& a : chain.api_servers) stuck_requests += a.stuck_requests;
  // The front-end symptom: requests pending (when tasks were read), or a step in flight in a
  // blocked engine core (an engine steps only with requests scheduled).
  if (chain.tasks_read() && stuck_requests == 0) return std::nullopt;
  if (engine == nullptr && (chain.engines.size() > 0 || stuck_requests == 0)) return std::nullopt;
  const Verdict* generic = root_verdict(found, job.key, chain.roots);
  RankSet roots;
  for (const auto* r : job.entries_in(chain.roots)) {
    if (stuck(*r) || (generic && generic->diverged_ranks.contains(*r->rank)))
      roots.insert(*r->rank);
  }
  roots.insert(chain.roots - job.present);
  if (roots.empty()) return std::nullopt;  // the workers move: a slow server, not a stuck one
  Verdict v = base_verdict(chain);
  v.title = "Requests are stuck behind a " + rank_noun(chain) + " rank of the serving deployment";
  v.confidence = generic ? generic->confidence : 0.75;
  v.diverged_ranks = roots;
  v.waiting_ranks = (generic ? generic->waiting_ranks : RankSet()) | (chain.awaited - roots);
  const auto roots_entries = job.entries_in(roots);
  std::string head;
  if (roots.size() == 1 && !roots_entries.empty()) {
    const auto& r = *roots_entries.front();
    head = capitalized(rank_noun(chain)) + " rank " + std::to_string(*r.rank) + " (" + r.node +
           " pid " + std::to_string(r.pid) + ") " + root_what(r);
  } else {
    head = capitalized(rank_noun(chain)) + " " + ranks_text(roots) + " " +
           (roots_entries.empty() ? std::string("are ") + std::string(to_string(job.missing_state))
                                  : "are stuck in " + roots_entries.front()->wait.describe());
  }
  std::string rest;
  if (engine != nullptr) {
    const std::string front = front_text(chain, "the engine core's output");
    rest = (front.empty() ? "" : front + ", and ") + "the engine core (" +
           who(engine->node, *engine->process) + ") waits in " + engine_wait_text(*engine) +
           " for " +
           (chain.awaited == job.present ? "its workers (job " + job.key + ")"
                                         : "worker " + ranks_text(chain.awaited));
  } else {
    rest = front_text(chain, "the ranks of job " + job.key);
  }
  // The rank the engine waits for, when it is not the root: what it waits in.
  const RankSet between = chain.awaited - roots;
  if (engine != nullptr && chain.awaited != job.present && !between.empty()) {
    const auto* w = job.find(between.front());
    if (w != nullptr && !w->waits_for.empty()) {
      rest += ", which " + std::string(between.size() == 1 ? "waits" : "wait") + " for " +
              ranks_text(w->waits_for) + " in " + w->wait.describe();
    }
  } else if (engine == nullptr && generic != nullptr && !generic->waiting_ranks.empty()) {
    const auto waiting = job.entries_in(generic->waiting_ranks);
    if (!waiting.empty()) {
      rest += ", and " + ranks_text(generic->waiting_ranks) +
              (generic->waiting_ranks.size() == 1 ? " waits" : " wait") + " for it in " +
              waiting.front()->wait.describe();
    }
  }
  v.summary = head + ": " + rest + ".";
  if (generic != nullptr) {
    v.evidence.push_back("the workers' verdict `" + generic->id + "`: " + generic->summary);
  }
  v.remedies.push_back(std::string(chain.engines.empty() ? "the API server only waits"
                                                         : "the API server and the engine core "
                                                           "only wait") +
                       ": look at " + rank_noun(chain) + " " + ranks_text(roots) +
                       " (its stack below); restarting the API server alone does not free the "
                       "requests");
  if (generic != nullptr) v.membership = generic->membership;
  return v;
}

// Requests pending while the engine core idles, waiting for input: they never reached it, or
// its outputs never came back.
std::optional<Verdict> idle_verdict(const ServingChain& chain) {
  std::size_t stuck_requests = 0;
  for (const auto& a : chain.api_servers) stuck_requests += a.stuck_requests;
  if (stuck_requests == 0 || chain.engines.empty()) return std::nullopt;
  for (const auto& e : chain.engines) {
    if (e.activity != "idle" || e.progressing.value_or(false)) return std::nullopt;
  }
  const auto& e = chain.engines.front();
  Verdict v = base_verdict(chain);
  v.title = "Requests are pending at the API server while the engine core is idle";
  v.confidence = 0.6;
  std::string front = front_text(chain, "the engine core's output");
  front[0] = 'T';  // "The API server's …"
  v.summary = front + ", but the engine core (" + who(e.node, *e.process) +
              ") is idle, waiting for input in " + e.waits_in +
              ": the requests never reached it, or its outputs never came back.";
  v.remedies.push_back(
      "check the sockets between the API server and the engine core (ZMQ ipc:// or tcp:// "
      "endpoints, VLLM_ENGINE_READY_TIMEOUT_S, the engine core's log) and the API server's "
      "output handler task");
  return v;
}

}  // namespace

std::vector<Verdict> serving_verdicts(const std::vector<ServingChain>& chains,
                                      const std::vector<Job>& jobs,
                                      const std::vector<Verdict>& found) {
  std::vector<Verdict> out;
  for (const auto& chain : chains) {
    const Job* job = find_job(jobs, chain.job);
    if (job != nullptr && !chain.job.empty()) {
      if (auto v = worker_verdict(chain, *job, found)) {
        out.push_back(std::move(*v));
        continue;
      }
    }
    if (auto v = idle_verdict(chain)) out.push_back(std::move(*v));
  }
  return out;
}

}  // namespace hangscope::analysis

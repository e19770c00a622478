// The serving chain, part 1, classify: which processes that are no rank are API servers, engine
// cores and DP coordinators (titles, roles, the framework tables' frames, asyncio tasks), and
// what each does: an API server's request tasks and which are stuck, an engine core's busy
// loop (blocked, idle, working) and its progress.
#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "hangscope/common/numbers.h"
#include "hangscope/common/text.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/model/frame_pattern.h"
#include "hangscope/waits/frameworks.h"
#include "serving_parts.h"

namespace hangscope::analysis::serving {
namespace {

using model::Frame;
using waits::find_meaning;
using waits::FrameMeaning;

std::string place(const Frame& f) {
  return (f.qualname.empty() ? f.function : f.qualname) + " (" + waits::short_path(f.file) + ":" +
         std::to_string(f.line) + ")";
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
    if (find_meaning(task.coroutine, FrameMeaning::kOutputHandler) != nullptr) {
      ++s.output_handlers;
      continue;
    }
    if (find_meaning(task.coroutine, FrameMeaning::kRequest) == nullptr) continue;
    ++s.pending_requests;
    if (!several || first_pending.count(task.address)) ++s.stuck_requests;
    // Where it waits: the innermost frame outside asyncio (`awaits` names asyncio's: Event.wait),
    // and the engine client's frame when that is another.
    const Frame* inner = innermost_own_frame(task);
    std::string where = inner == nullptr ? "?" : place(*inner);
    if (const auto* f = find_meaning(task.coroutine, FrameMeaning::kEngineClient);
        f != nullptr && f != inner) {
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
  if (find_meaning(thread->python_frames, FrameMeaning::kEngineStep) != nullptr ||
      waits::waits_on_peers(s.wait.kind)) {
    s.activity = waits ? "blocked" : "working";
  } else {
    s.activity = waits ? "idle" : "working";
  }
  s.waits_in = s.wait.describe();
  // The executor's call that waits (get_response in multiproc_executor.py), when it is not
  // already the described frame.
  for (const auto& f : thread->python_frames) {
    if (!waits::means(f, FrameMeaning::kExecutor)) continue;
    if (!s.wait.python || s.wait.python->file != f.file || s.wait.python->line != f.line) {
      s.waits_in += " <- " + place(f);
    }
    break;
  }
  measure(bundle, node, s.wait, s);
}

}  // namespace

std::string who(const std::string& node, const model::ProcessRecord& p) {
  return node + " pid " + std::to_string(p.pid);
}

const model::ThreadDump* busy_loop_thread(const model::ProcessRecord& p) {
  if (!p.dump) return nullptr;
  for (const auto& t : p.dump->threads) {
    if (find_meaning(t.python_frames, FrameMeaning::kBusyLoop) != nullptr) return &t;
  }
  return nullptr;
}

Classified classify(const model::Bundle& bundle, const std::vector<OtherProcess>& others) {
  Classified out;
  auto& [apis, engines, coordinators] = out;
  // The role was decided when the node was captured (or its snapshot read: waits/serving_roles.h).
  for (const auto& o : others) {
    const auto& p = *o.process;
    ServingProcess s;
    s.node = o.node;
    s.process = &p;
    s.title = p.identity.title;
    s.wait = o.wait;
    s.role = p.identity.role;
    switch (p.identity.role) {
      case model::ProcessRole::kEngine:
        read_engine(bundle, o.node, s);
        engines.push_back(std::move(s));
        break;
      case model::ProcessRole::kCoordinator:
        coordinators.push_back(std::move(s));
        break;
      case model::ProcessRole::kApi:
        read_tasks(bundle, o.node, s);
        apis.push_back(std::move(s));
        break;
      default:
        break;
    }
  }
  return out;
}

std::string serving_framework(const std::vector<ServingProcess>& apis) {
  for (const auto* framework : waits::frameworks()) {
    if (!framework->serving || framework->serving->command_word.empty()) continue;
    for (const auto& p : apis) {
      if (p.process->cmdline.find(framework->serving->command_word) != std::string::npos) {
        return std::string(framework->name);
      }
    }
  }
  return std::string(waits::default_serving_framework().name);
}

const waits::ServingFront& chain_serving_front(const ServingChain& chain) {
  const auto* framework = waits::framework_named(chain.framework);
  if (framework != nullptr && framework->serving) return *framework->serving;
  return *waits::default_serving_framework().serving;
}

}  // namespace hangscope::analysis::serving

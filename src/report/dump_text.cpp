// `hangscope dump`'s text: every string read from the target goes through printable() (docs/
// security.md, "Text from outside"), so a name cannot move the cursor, clear the screen or start
// a line of its own.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "hangscope/analysis/rank_set.h"
#include "hangscope/common/text.h"
#include "hangscope/report/dump_format.h"

namespace hangscope::report {
namespace {

std::string hex(std::uint64_t value) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "0x%" PRIx64, value);
  return buffer;
}

std::string frame_line(std::size_t index, const model::Frame& frame) {
  std::ostringstream line;
  line << "  #" << index << (index < 10 ? "  " : " ");
  if (frame.kind == model::Frame::Kind::kPython) {
    line << "[py] " << printable(frame.qualname.empty() ? frame.function : frame.qualname) << " ("
         << printable(frame.file) << ":" << frame.line << ")";
    for (const auto& [name, value] : frame.locals) {
      line << "\n        " << printable(name) << " = " << printable(value);
    }
    return line.str();
  }
  char address[24];
  std::snprintf(address, sizeof address, "0x%016" PRIx64, frame.address);
  line << address << "  ";
  if (!frame.function.empty()) {
    line << printable(frame.function) << " + " << hex(frame.offset);
  } else {
    line << "??";
  }
  if (!frame.module.empty()) {
    line << "  (" << printable(frame.module);
    if (frame.function.empty()) line << " + " << hex(frame.module_offset);
    line << ")";
  }
  return line.str();
}

const model::AsyncTask* task_at(const model::ProcessDump& dump, std::uint64_t address) {
  for (const auto& task : dump.tasks) {
    if (task.address == address) return &task;
  }
  return nullptr;
}

// Everything a task's text says after its name: state, flags, what it awaits, notes, and its
// coroutine chain. Tasks with the same tail are printed once.
std::string task_tail(const model::AsyncTask& task, const model::ProcessDump& dump,
                      const std::string& indent) {
  std::ostringstream out;
  out << task_state_name(task.state);
  if (task.running) out << " [running]";
  if (task.eager) out << " [eager]";
  if (task.awaited_task) {
    const auto* awaited = task_at(dump, *task.awaited_task);
    out << ", awaits Task";
    if (awaited) out << " \"" << printable(awaited->name) << "\"";
    out << " (" << hex(*task.awaited_task) << ")";
  } else if (!task.awaits.empty()) {
    out << ", awaits " << printable(task.awaits);
  }
  out << "\n";
  for (const auto& note : task.notes) out << indent << "  note: " << printable(note) << "\n";
  for (std::size_t i = 0; i < task.coroutine.size(); ++i) {
    out << indent << frame_line(i, task.coroutine[i]) << "\n";
  }
  return out.str();
}

// A loop's tasks, those in the same state awaiting the same thing through the same chain
// printed once under their count and names (a stuck server's hundred request tasks are one
// entry), largest groups first, then in the order they were read.
std::string grouped_tasks_text(const std::vector<const model::AsyncTask*>& tasks,
                               const model::ProcessDump& dump, const std::string& indent) {
  constexpr std::size_t kNamesShown = 5;
  std::vector<std::pair<std::string, std::vector<const model::AsyncTask*>>> groups;
  std::map<std::string, std::size_t> group_of_tail;
  for (const auto* task : tasks) {
    auto tail = task_tail(*task, dump, indent);
    const auto [at, added] = group_of_tail.try_emplace(tail, groups.size());
    if (added) groups.emplace_back(std::move(tail), std::vector<const model::AsyncTask*>{});
    groups[at->second].second.push_back(task);
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::ostringstream out;
  for (const auto& [tail, members] : groups) {
    if (members.size() == 1) {
      out << indent << "Task \"" << printable(members.front()->name) << "\" " << tail;
      continue;
    }
    out << indent << members.size() << " tasks (";
    for (std::size_t i = 0; i < members.size() && i < kNamesShown; ++i) {
      out << (i ? ", " : "") << "\"" << printable(members[i]->name) << "\"";
    }
    if (members.size() > kNamesShown) out << " and " << members.size() - kNamesShown << " more";
    out << ") " << tail;
  }
  return out.str();
}

// The tasks of each loop that runs on `tid` (nullopt: loops no known thread runs).
std::string loop_tasks(const model::ProcessDump& dump, std::optional<pid_t> tid) {
  std::map<std::uint64_t, std::vector<const model::AsyncTask*>> loops;
  for (const auto& task : dump.tasks) {
    if (task.tid == tid) loops[task.loop].push_back(&task);
  }
  std::ostringstream out;
  for (const auto& [loop, tasks] : loops) {
    out << (tid ? "  " : "\n") << (tid ? "asyncio tasks of loop " : "Tasks of loop ") << hex(loop)
        << (tid ? "" : " (no thread runs it)") << ": " << tasks.size() << "\n";
    out << grouped_tasks_text(tasks, dump, tid ? "    " : "  ");
  }
  return out.str();
}

}  // namespace

std::string task_state_name(model::AsyncTask::State state) {
  switch (state) {
    case model::AsyncTask::State::kPending:
      return "pending";
    case model::AsyncTask::State::kCancelled:
      return "cancelled";
    case model::AsyncTask::State::kFinished:
      return "finished";
  }
  return "?";
}

std::string task_to_text(const model::AsyncTask& task, const model::ProcessDump& dump,
                         const std::string& indent) {
  return indent + "Task \"" + printable(task.name) + "\" " + task_tail(task, dump, indent);
}

std::string group_ranks_text(const model::ProcessGroupState& group) {
  if (group.ranks.empty() && group.size > 0) return "0-" + std::to_string(group.size - 1);
  return analysis::compress_ranks(group.ranks);
}

std::string distributed_to_text(const model::DistributedState& state) {
  std::ostringstream out;
  out << "torch.distributed: ";
  if (!state.initialized()) {
    out << "imported, no process group yet\n";
  } else {
    out << "rank " << (state.rank ? std::to_string(*state.rank) : std::string("unknown")) << " of "
        << (state.world_size ? std::to_string(*state.world_size) : std::string("?"))
        << (state.init_method.empty() ? "" : " (" + printable(state.init_method) + ")") << "\n";
  }
  for (const auto& g : state.groups) {
    out << "  process group " << printable(g.name) << " ("
        << (g.backend.empty() ? "?" : printable(g.backend)) << (g.is_default ? ", default" : "");
    for (const auto& label : g.labels) out << ", " << printable(label);
    out << "): ranks " << group_ranks_text(g);
    if (g.group_rank) out << "; this rank " << *g.group_rank;
    if (g.sequence) out << "; sequence number " << *g.sequence;
    out << "\n";
  }
  for (const auto& note : state.notes) out << "  note: " << printable(note) << "\n";
  return out.str();
}

std::string dump_to_text(const model::ProcessDump& dump) {
  std::ostringstream out;
  out << "Process " << dump.pid << " (" << printable(dump.command) << "), " << dump.threads.size()
      << " thread" << (dump.threads.size() == 1 ? "" : "s");
  if (dump.python) out << ", Python " << printable(*dump.python);
  out << "\n";
  for (const auto& note : dump.notes) out << "note: " << printable(note) << "\n";
  if (dump.distributed) out << distributed_to_text(*dump.distributed);
  for (const auto& thread : dump.threads) {
    out << "\nThread " << thread.tid << " \"" << printable(thread.name) << "\" "
        << printable(std::string_view(&thread.state, 1)) << " ("
        << model::describe_state(thread.state) << ")";
    if (!thread.wchan.empty()) out << " in " << printable(thread.wchan);
    if (thread.py_thread_name) out << " [Python " << printable(*thread.py_thread_name) << "]";
    if (thread.merge != model::kMergeOk) out << "\n  merge " << printable(thread.merge);
    if (thread.holds_gil) out << " [holds GIL]";
    out << "\n";
    for (const auto& note : thread.notes) out << "  note: " << printable(note) << "\n";
    for (std::size_t i = 0; i < thread.frames.size(); ++i) {
      out << frame_line(i, thread.frames[i]) << "\n";
    }
    for (const auto& kernel_frame : thread.kernel_stack)
      out << "  [kernel] " << printable(kernel_frame) << "\n";
    out << loop_tasks(dump, thread.tid);
  }
  // Tasks of loops no thread runs (not running, or their thread was not matched).
  out << loop_tasks(dump, std::nullopt);
  if (!dump.sockets.empty()) out << "\nSockets: " << dump.sockets.size() << "\n";
  for (const auto& socket : dump.sockets) out << "  " << socket_to_text(socket) << "\n";
  return out.str();
}

std::string socket_to_text(const model::Socket& socket) {
  std::string out = "fd " + std::to_string(socket.fd);
  if (socket.family == model::Socket::Family::kTcp) {
    out += " tcp " + std::string(socket.state_name()) + " " + printable(socket.local);
    if (socket.state != model::SocketState::kListen) out += " -> " + printable(socket.remote);
  } else {
    out += " unix " + printable(socket.type) + " " + std::string(socket.state_name());
    if (!socket.path.empty()) out += " " + printable(socket.path);
    if (socket.peer_inode != 0) out += ", peer inode " + std::to_string(socket.peer_inode);
  }
  return out + " (inode " + std::to_string(socket.inode) + ")";
}

}  // namespace hangscope::report

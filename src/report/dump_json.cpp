#include "hangscope/report/dump_format.h"
#include "json_values.h"

namespace hangscope::report {
namespace {

nlohmann::json nullable(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}

nlohmann::json frame_to_json(const model::Frame& frame) {
  if (frame.kind == model::Frame::Kind::kPython) {
    nlohmann::json json{{"kind", "python"},
                        {"function", frame.function},
                        {"qualname", frame.qualname},
                        {"file", frame.file},
                        {"line", frame.line}};
    if (!frame.locals.empty()) {
      nlohmann::json locals = nlohmann::json::object();
      for (const auto& [name, value] : frame.locals) locals[name] = value;
      json["locals"] = std::move(locals);
    }
    return json;
  }
  return {{"kind", "native"},
          {"function", nullable(frame.function)},
          {"module", nullable(frame.module)},
          {"offset", frame.offset},
          {"module_offset", frame.module_offset},
          {"address", frame.address}};
}

nlohmann::json frames_json(const model::FrameList& frames) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : frames) out.push_back(frame_to_json(f));
  return out;
}

std::int64_t micros(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

}  // namespace

nlohmann::json dump_to_json(const model::ProcessDump& dump) {
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& t : dump.threads) {
    threads.push_back({{"tid", t.tid},
                       {"name", t.name},
                       {"state", std::string(1, t.state)},
                       {"wchan", nullable(t.wchan)},
                       {"py_thread_id", json_or_null(t.py_thread_id)},
                       {"py_thread_name", json_or_null(t.py_thread_name)},
                       {"holds_gil", t.holds_gil},
                       {"merge", t.merge},
                       {"paused_us", micros(t.paused)},
                       {"notes", t.notes},
                       {"kernel_stack", t.kernel_stack},
                       {"frames", frames_json(t.frames)},
                       {"native_frames", frames_json(t.native_frames)},
                       {"python_frames", frames_json(t.python_frames)}});
  }
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& task : dump.tasks) tasks.push_back(task_to_json(task));
  nlohmann::json sockets = nlohmann::json::array();
  for (const auto& socket : dump.sockets) sockets.push_back(socket_to_json(socket));
  return {{"pid", dump.pid},
          {"command", dump.command},
          {"python", json_or_null(dump.python)},
          {"notes", dump.notes},
          {"capture_us", micros(dump.capture_time)},
          {"max_paused_us", micros(dump.max_paused)},
          {"distributed",
           dump.distributed ? distributed_to_json(*dump.distributed) : nlohmann::json(nullptr)},
          {"threads", std::move(threads)},
          {"tasks", std::move(tasks)},
          {"sockets", std::move(sockets)}};
}

nlohmann::json socket_to_json(const model::Socket& socket) {
  nlohmann::json out = {{"fd", socket.fd},
                        {"inode", socket.inode},
                        {"type", socket.type},
                        {"state", socket.state_name()}};
  if (socket.family == model::Socket::Family::kUnix) {
    out["family"] = "unix";
    out["path"] = nullable(socket.path);
    out["peer_inode"] =
        socket.peer_inode == 0 ? nlohmann::json(nullptr) : nlohmann::json(socket.peer_inode);
  } else {
    out["family"] = "tcp";
    out["local"] = socket.local;
    out["remote"] = socket.remote;
    out["tx_queue"] = socket.tx_queue;
    out["rx_queue"] = socket.rx_queue;
    out["retransmits"] = socket.retransmits;
  }
  return out;
}

nlohmann::json task_to_json(const model::AsyncTask& task) {
  return {{"address", task.address},
          {"loop", task.loop},
          {"tid", json_or_null(task.tid)},
          {"name", task.name},
          {"state", task_state_name(task.state)},
          {"eager", task.eager},
          {"running", task.running},
          {"coroutine", frames_json(task.coroutine)},
          {"awaited_task", json_or_null(task.awaited_task)},
          {"awaits", nullable(task.awaits)},
          {"notes", task.notes}};
}

nlohmann::json distributed_to_json(const model::DistributedState& state) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : state.groups) {
    nlohmann::json group = {{"name", g.name},
                            {"backend", g.backend},
                            {"ranks", group_ranks_text(g)},
                            {"size", g.size},
                            {"group_rank", json_or_null(g.group_rank)},
                            {"sequence", json_or_null(g.sequence)},
                            {"default", g.is_default},
                            {"labels", g.labels}};
    // Schema 2.6's fields, written when they say something (older outputs stay the same).
    if (!g.registered) {
      group["registered"] = false;
      group["type"] = g.type;
      group["held_by"] = g.held_by;
    }
    if (!g.store.empty()) {
      group["store"] = g.store;
      group["store_prefixes"] = g.store_prefixes;
    }
    if (!g.counters.empty()) group["counters"] = g.counters;
    groups.push_back(std::move(group));
  }
  return {{"rank", json_or_null(state.rank)},
          {"world_size", json_or_null(state.world_size)},
          {"init_method", state.init_method},
          {"registry", state.registry},
          {"coordinates", state.coordinates},
          {"groups", std::move(groups)},
          {"notes", state.notes}};
}

}  // namespace hangscope::report

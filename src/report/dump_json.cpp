#include "hangscope/report/dump_format.h"

namespace hangscope::report {
namespace {

nlohmann::json frame_to_json(const capture::Frame& frame) {
  if (frame.kind == capture::Frame::Kind::kPython) {
    return {{"kind", "python"},
            {"function", frame.function},
            {"qualname", frame.qualname},
            {"file", frame.file},
            {"line", frame.line}};
  }
  return {{"kind", "native"},
          {"function",
           frame.function.empty() ? nlohmann::json(nullptr) : nlohmann::json(frame.function)},
          {"module", frame.module.empty() ? nlohmann::json(nullptr) : nlohmann::json(frame.module)},
          {"offset", frame.offset},
          {"module_offset", frame.module_offset},
          {"address", frame.address}};
}

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json dump_to_json(const capture::ProcessDump& dump) {
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& t : dump.threads) {
    nlohmann::json frames = nlohmann::json::array();
    for (const auto& f : t.frames) frames.push_back(frame_to_json(f));
    threads.push_back(
        {{"tid", t.tid},
         {"name", t.name},
         {"state", std::string(1, t.state)},
         {"wchan", t.wchan.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.wchan)},
         {"py_thread_id", optional_json(t.py_thread_id)},
         {"py_thread_name", optional_json(t.py_thread_name)},
         {"holds_gil", t.holds_gil},
         {"merge", t.merge},
         {"paused_us", std::chrono::duration_cast<std::chrono::microseconds>(t.paused).count()},
         {"notes", t.notes},
         {"kernel_stack", t.kernel_stack},
         {"frames", std::move(frames)}});
  }
  return {{"pid", dump.pid},
          {"command", dump.command},
          {"python", optional_json(dump.python)},
          {"notes", dump.notes},
          {"capture_us",
           std::chrono::duration_cast<std::chrono::microseconds>(dump.capture_time).count()},
          {"max_paused_us",
           std::chrono::duration_cast<std::chrono::microseconds>(dump.max_paused).count()},
          {"threads", std::move(threads)}};
}

}  // namespace hangscope::report

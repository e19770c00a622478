#include "hangscope/report/dump_format.h"
#include "hangscope/v1/process.pb.h"

namespace hangscope::report {

namespace {

void fill_frame(v1::Frame& frame, const model::Frame& f) {
  const bool python = f.kind == model::Frame::Kind::kPython;
  frame.set_kind(python ? v1::Frame::KIND_PYTHON : v1::Frame::KIND_NATIVE);
  frame.set_function(f.function);
  frame.set_module(f.module);
  frame.set_address(f.address);
  frame.set_offset(f.offset);
  frame.set_module_offset(f.module_offset);
  frame.set_qualname(f.qualname);
  frame.set_file(f.file);
  frame.set_line(f.line);
  for (const auto& [name, value] : f.locals) {
    auto* local = frame.add_locals();
    local->set_name(name);
    local->set_value(value);
  }
}

}  // namespace

void dump_to_proto(const model::ProcessDump& dump, v1::ProcessDump& out) {
  out.Clear();
  out.set_pid(dump.pid);
  out.set_command(dump.command);
  if (dump.python) out.set_python(*dump.python);
  for (const auto& note : dump.notes) out.add_notes(note);
  out.set_capture_ns(static_cast<std::uint64_t>(dump.capture_time.count()));
  out.set_max_paused_ns(static_cast<std::uint64_t>(dump.max_paused.count()));
  for (const auto& t : dump.threads) {
    auto* thread = out.add_threads();
    thread->set_tid(t.tid);
    thread->set_name(t.name);
    thread->set_state(std::string(1, t.state));
    thread->set_wchan(t.wchan);
    thread->set_merge(t.merge);
    thread->set_paused_ns(static_cast<std::uint64_t>(t.paused.count()));
    for (const auto& note : t.notes) thread->add_notes(note);
    for (const auto& f : t.frames) fill_frame(*thread->add_frames(), f);
    for (const auto& f : t.native_frames) fill_frame(*thread->add_native_frames(), f);
    for (const auto& f : t.python_frames) fill_frame(*thread->add_python_frames(), f);
    if (t.py_thread_id) thread->set_py_thread_id(*t.py_thread_id);
    if (t.py_thread_name) thread->set_py_thread_name(*t.py_thread_name);
    thread->set_holds_gil(t.holds_gil);
    for (const auto& k : t.kernel_stack) thread->add_kernel_stack(k);
  }
}

}  // namespace hangscope::report

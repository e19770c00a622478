#include "hangscope/python/merge.h"

#include <string_view>

namespace hangscope::python {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Interpreter internals between Python frames: calls, vectorcalls, eval entry points.
bool is_plumbing(const model::Frame& frame, const std::string& interpreter_module) {
  if (frame.module != interpreter_module) return false;
  const std::string_view f = frame.function;
  if (f.empty()) return true;
  return starts_with(f, "_Py") || starts_with(f, "Py") || f.find("vectorcall") != f.npos ||
         f.find("call_function") != f.npos || starts_with(f, "cfunction_call") ||
         starts_with(f, "slot_tp_") || starts_with(f, "method_") || starts_with(f, "run_") ||
         starts_with(f, "pyrun_") || starts_with(f, "pymain_") || starts_with(f, "thread_run") ||
         starts_with(f, "pythread_wrapper") || starts_with(f, "gen_send") ||
         starts_with(f, "object_vacall") || starts_with(f, "builtin_exec") || f == "main" ||
         f == "_start";
}

}  // namespace

bool is_eval_frame(const model::Frame& frame) {
  return frame.function.find("_PyEval_EvalFrameDefault") != std::string::npos;
}

model::Frame to_frame(const PyFrame& py) {
  model::Frame frame;
  frame.kind = model::Frame::Kind::kPython;
  frame.function = py.function;
  frame.qualname = py.qualname;
  frame.file = py.file;
  frame.line = py.line;
  frame.locals = py.locals;
  return frame;
}

MergedStack merge_stacks(const std::vector<model::Frame>& native,
                         const std::vector<PyFrame>& python,
                         const std::string& interpreter_module) {
  MergedStack result;
  // Python frames grouped per eval call, innermost group first.
  std::vector<std::vector<const PyFrame*>> groups;
  for (const auto& frame : python) {
    if (groups.empty() || groups.back().empty() || groups.back().back()->eval_entry) {
      groups.emplace_back();
    }
    groups.back().push_back(&frame);
  }
  std::size_t eval_frames = 0;
  for (const auto& frame : native) eval_frames += is_eval_frame(frame) ? 1 : 0;

  if (eval_frames != groups.size()) {
    for (const auto& frame : python) result.frames.push_back(to_frame(frame));
    result.frames.insert(result.frames.end(), native.begin(), native.end());
    result.merge = "failed: " + std::to_string(eval_frames) + " native eval frames for " +
                   std::to_string(groups.size()) +
                   " Python frame groups; both stacks shown, Python first";
    return result;
  }
  std::size_t group = 0;
  for (const auto& frame : native) {
    if (is_eval_frame(frame)) {
      for (const PyFrame* py : groups[group]) result.frames.push_back(to_frame(*py));
      ++group;
    } else if (python.empty() || !is_plumbing(frame, interpreter_module)) {
      result.frames.push_back(frame);
    }
  }
  result.merge = model::kMergeOk;
  return result;
}

}  // namespace hangscope::python

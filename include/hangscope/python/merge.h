// Merges a thread's native stack with its Python stack: every native _PyEval_EvalFrameDefault
// is replaced by the Python frames it runs, and interpreter plumbing is hidden.
#pragma once

#include <string>
#include <vector>

#include "hangscope/model/process_dump.h"
#include "hangscope/python/stack_reader.h"

namespace hangscope::python {

struct MergedStack {
  std::vector<model::Frame> frames;  // innermost first
  std::string merge;                 // model::kMergeOk or "failed: <why>"
};

model::Frame to_frame(const PyFrame& frame);

// `interpreter_module` is the file that holds the interpreter (its frames are the plumbing).
// When the native eval frames and the Python frame groups do not pair up, the result holds
// the Python frames followed by the native frames, and `merge` says why.
MergedStack merge_stacks(const std::vector<model::Frame>& native,
                         const std::vector<PyFrame>& python, const std::string& interpreter_module);

// True for a native frame that runs Python code (_PyEval_EvalFrameDefault, incl. .cold parts).
bool is_eval_frame(const model::Frame& frame);

}  // namespace hangscope::python

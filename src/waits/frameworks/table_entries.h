// The two ways a framework table names a frame (private to waits/frameworks/): a Python function
// in a file, or a native symbol. One definition, shared by every table (and by unity builds).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "hangscope/model/frame_pattern.h"

namespace hangscope::waits::table_entries {

inline model::FramePattern py(std::string file, std::vector<std::string> functions = {}) {
  return model::FramePattern::python(std::move(file), std::move(functions));
}

inline model::FramePattern sym(std::string fragment) {
  return model::FramePattern::native_symbol(std::move(fragment));
}

}  // namespace hangscope::waits::table_entries

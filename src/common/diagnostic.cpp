#include "hangscope/common/diagnostic.h"

namespace hangscope {

std::string_view to_string(WalkEnd end) {
  switch (end) {
    case WalkEnd::kComplete:
      return "complete";
    case WalkEnd::kFrameLimit:
      return "frame-limit";
    case WalkEnd::kUnreadableMemory:
      return "unreadable-memory";
    case WalkEnd::kLoop:
      return "loop";
    case WalkEnd::kStackPointerBackwards:
      return "stack-pointer-backwards";
    case WalkEnd::kNoUnwindInfo:
      return "no-unwind-info";
    case WalkEnd::kUnwindFailed:
      return "unwind-failed";
  }
  return "unknown";
}

std::string_view to_string(DiagnosticCode code) {
  switch (code) {
    case DiagnosticCode::kUnknown:
      return "unknown";
    case DiagnosticCode::kNotPython:
      return "not-python";
    case DiagnosticCode::kPythonUnsupported:
      return "python-unsupported";
    case DiagnosticCode::kPythonUnreadable:
      return "python-unreadable";
    case DiagnosticCode::kStackCut:
      return "stack-cut";
    case DiagnosticCode::kStackBroken:
      return "stack-broken";
    case DiagnosticCode::kDamagedFrame:
      return "damaged-frame";
  }
  return "unknown";
}

}  // namespace hangscope

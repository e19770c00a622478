// Typed outcomes of captures and stack walks: a code that callers branch on, and the text that
// people read. Code decides, text only reports: rewording a message never changes behaviour.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hangscope {

// Why a walk of one thread's stack (native or Python) ended.
enum class WalkEnd : std::uint8_t {
  kComplete,               // it reached the outermost frame (or the thread runs no frame)
  kFrameLimit,             // cut at the caller's frame limit: the frames read are sound
  kUnreadableMemory,       // a frame (Python) or a word the unwinder needed (native) was unreadable
  kLoop,                   // Python: a frame seen before in the same chain
  kStackPointerBackwards,  // native: the caller's stack pointer lies below the callee's
  kNoUnwindInfo,           // native: no unwind information covers the pc
  kUnwindFailed,           // native: libunwind could not start, or failed for another reason
};

// A stable name ("frame-limit"), for logs and tests.
std::string_view to_string(WalkEnd end);

// What a capture or walk outcome is, for the code that acts on it.
enum class DiagnosticCode : std::uint8_t {
  kUnknown,  // not classified (e.g. text from elsewhere)
  // The interpreter of a process (python::find_interpreter, capture's Python session).
  kNotPython,          // no interpreter is mapped: a native process, nothing to report
  kPythonUnsupported,  // an interpreter hangscope does not read (version, build)
  kPythonUnreadable,   // the interpreter's file or tables could not be read or trusted
  // One thread's Python stack (python::PyThread::error).
  kStackCut,      // the walk stopped at the frame limit: the frames read are sound
  kStackBroken,   // the walk ended early (unreadable frame, loop): a torn or damaged read
  kDamagedFrame,  // a frame's code object could not be read; the walk went on past it
};

// A stable name ("not-python"), for logs and tests.
std::string_view to_string(DiagnosticCode code);

struct Diagnostic {
  DiagnosticCode code = DiagnosticCode::kUnknown;
  std::string text;  // for people: shown as it is in notes and reports
};

}  // namespace hangscope

// The result of capturing one process: its threads, their state and their merged stacks.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hangscope::capture {

struct Frame {
  enum class Kind { kNative, kPython };
  Kind kind = Kind::kNative;
  std::string function;  // demangled symbol / co_name; "" when unknown
  // native
  std::string module;  // path of the ELF file; "" when in no file mapping
  std::uint64_t address = 0;
  std::uint64_t offset = 0;  // from the function start, or from the module when unnamed
  std::uint64_t module_offset = 0;
  // python
  std::string qualname;
  std::string file;
  int line = 0;
  std::vector<std::pair<std::string, std::string>> locals;  // name, repr (--locals)

  bool operator==(const Frame&) const = default;
};

struct ThreadDump {
  pid_t tid = 0;
  std::string name;  // comm
  char state = '?';  // before hangscope stopped it
  std::string wchan;
  std::vector<std::string> kernel_stack;  // for threads that could not be stopped (state D)
  std::optional<std::uint64_t> py_thread_id;
  std::optional<std::string> py_thread_name;
  bool holds_gil = false;
  std::string merge = "ok";
  std::vector<Frame> frames;         // merged view, innermost first
  std::vector<Frame> native_frames;  // raw native stack (kept for snapshots)
  std::vector<Frame> python_frames;  // raw Python stack (kept for snapshots)
  std::vector<std::string> notes;    // what went wrong for this thread
  std::chrono::nanoseconds paused{0};
  std::uint64_t utime_ticks = 0;  // CPU time of this thread (clock ticks), read before stopping
  std::uint64_t stime_ticks = 0;
  std::uint64_t context_switches = 0;  // voluntary + involuntary, read before stopping
};

struct ProcessDump {
  pid_t pid = 0;
  std::string command;                // comm of the process
  std::optional<std::string> python;  // interpreter version
  std::vector<std::string> notes;     // process-wide notes (unreadable files, ...)
  std::vector<ThreadDump> threads;
  std::chrono::nanoseconds capture_time{0};
  std::chrono::nanoseconds max_paused{0};
};

}  // namespace hangscope::capture

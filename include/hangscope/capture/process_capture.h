// Captures one process: checks it can be examined, freezes and copies threads, unwinds,
// symbolizes, reads the Python interpreter, and merges native and Python stacks.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>

#include "hangscope/elf/module_cache.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/native/freezer.h"
#include "hangscope/proc/maps.h"

namespace hangscope::capture {

enum class StackKinds {
  kMerged,      // native + Python, merged (Python processes) or native alone
  kNativeOnly,  // no interpreter reads
  kPythonOnly,  // no thread is stopped: Python stacks read from memory while the process runs
};

struct CaptureOptions {
  native::FreezeOptions freeze;
  std::size_t max_native_frames = 2048;
  StackKinds stacks = StackKinds::kMerged;
  bool locals = false;  // Python locals of every frame (simple values, masked)
  bool tasks = false;   // asyncio tasks of every event loop (ProcessDump::tasks)
  // With tasks: each coroutine frame's locals too (`dump --tasks --locals`). Off for snapshots:
  // each request's own locals would keep its chain from being shared on the wire.
  bool task_locals = false;
  // Parsed ELF modules shared across the processes and samples of a node (optional).
  std::shared_ptr<elf::ModuleCache> modules;
};

// Throws hangscope::Error with a one-line message naming the pid and the reason when the
// process cannot be captured at all (does not exist, zombie, kernel thread, /proc unreadable).
// Problems with single threads, files or the interpreter become notes in the dump instead.
// `maps`: the process's memory map when the caller has just read it (it is read otherwise;
// /proc/PID/maps of a torch process takes milliseconds to read).
model::ProcessDump capture_process(pid_t pid, const CaptureOptions& options,
                                   std::optional<proc::MemoryMap> maps = std::nullopt);

}  // namespace hangscope::capture

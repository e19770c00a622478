// Reads a process from its core file (kernel-written or gcore) as `hangscope dump --pid` reads a
// live one: native and Python stacks, torch.distributed's state, its environment. What a core
// does not record (thread states, wait channels, progress) is said to be unknown, never guessed.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "hangscope/capture/process_capture.h"
#include "hangscope/elf/module_cache.h"
#include "hangscope/model/node_snapshot.h"
#include "hangscope/model/process_dump.h"

namespace hangscope::capture {

struct CoreOptions {
  std::string executable;  // --exe: the program, when the path the core names does not hold it
  std::string sysroot;     // --sysroot: a copy of the machine's files ("" = this machine's)
  StackKinds stacks = StackKinds::kMerged;
  bool locals = false;
  bool tasks = false;        // asyncio tasks of every event loop
  bool task_locals = false;  // with tasks: each coroutine frame's locals (CaptureOptions)
  std::size_t max_native_frames = 2048;
  std::shared_ptr<elf::ModuleCache> modules;  // shared by the cores of one diagnosis
};

// Throws hangscope::Error naming the file and the reason when it is no readable core. Files the
// core names that cannot be opened, or that differ from the ones the process ran (build id),
// are named in the dump's notes; their frames show addresses only.
model::ProcessDump capture_core(const std::string& path, const CoreOptions& options);

// The core as a process of a snapshot: its dump, the command line and environment it held
// (masked, allowlisted), and its identity from the environment, the title and torch.distributed
// state in its memory. Never throws: a core that cannot be read is a record whose `error` says
// why.
model::ProcessRecord core_record(const std::string& path, const CoreOptions& options);

}  // namespace hangscope::capture

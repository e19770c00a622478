// Reads a process from its core file (kernel-written or gcore) as `hangscope dump --pid` reads a
// live one, through the same assembly (capture_target.h): native and Python stacks,
// torch.distributed's state, its environment. What a core does not record (thread states, wait
// channels, progress) is said to be unknown, never guessed.
#pragma once

#include <memory>
#include <string>

#include "hangscope/capture/capture_target.h"
#include "hangscope/model/node_snapshot.h"
#include "hangscope/model/process_dump.h"

namespace hangscope::capture {

struct CoreOptions : ReadOptions {
  std::string executable;  // --exe: the program, when the path the core names does not hold it
  std::string sysroot;     // --sysroot: a copy of the machine's files ("" = this machine's)
};

// The core as a capture target: its threads' registers and signals, the process it names, its
// bytes (else the bytes of the files mapped there) behind one MemoryReader, the mapped files
// opened under `options.sysroot`. Throws hangscope::Error naming the file and the reason when it
// is no readable core.
std::unique_ptr<CaptureTarget> open_core(const std::string& path, const CoreOptions& options);

// open_core, then assemble_dump. Files the core names that cannot be opened, or that differ
// from the ones the process ran (build id), are named in the dump's notes; their frames show
// addresses only.
model::ProcessDump capture_core(const std::string& path, const CoreOptions& options);

// The core as a process of a snapshot: its dump, the command line and environment it held
// (masked, allowlisted), and its identity from the environment, the title and torch.distributed
// state in its memory. Never throws: a core that cannot be read is a record whose `error` says
// why.
model::ProcessRecord core_record(const std::string& path, const CoreOptions& options);

}  // namespace hangscope::capture

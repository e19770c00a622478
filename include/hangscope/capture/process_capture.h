// Captures one live process: checks it can be examined, stops and copies its threads, and
// assembles its dump (capture_target.h) with what only a live process has: /proc's thread
// states and wait channels, threads read again while stopped, its sockets.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>

#include "hangscope/capture/capture_target.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/native/freezer.h"
#include "hangscope/proc/maps.h"

namespace hangscope::capture {

class SocketTables;  // capture/sockets.h

struct CaptureOptions : ReadOptions {
  native::FreezeOptions freeze;
  // The sockets it holds (ProcessDump::sockets), read after every thread is released: `dump`
  // reads them only when asked (--sockets); node captures always (the serving chain and the
  // groups' identity use them).
  bool sockets = false;
  // The socket tables of the capture this process is part of, shared by its processes (each
  // network namespace read once); a capture of its own otherwise.
  std::shared_ptr<SocketTables> socket_tables;
};

// The live process as a capture target: its /proc, its memory, its threads stopped (or, Python-
// only, listed) as `options.freeze` says. Throws hangscope::Error with a one-line message naming
// the pid and the reason when the process cannot be captured at all (does not exist, zombie,
// kernel thread, /proc unreadable). `maps`: the process's memory map when the caller has just
// read it (it is read otherwise; /proc/PID/maps of a torch process takes milliseconds to read).
std::unique_ptr<CaptureTarget> open_process(pid_t pid, const CaptureOptions& options,
                                            std::optional<proc::MemoryMap> maps = std::nullopt);

// open_process, then assemble_dump. Throws as open_process does, and when every thread exited
// during the capture. Problems with single threads, files or the interpreter become notes in the
// dump instead.
model::ProcessDump capture_process(pid_t pid, const CaptureOptions& options,
                                   std::optional<proc::MemoryMap> maps = std::nullopt);

// The CPython versions whose Python stacks a capture reads ("3.10 to 3.14"), for --version.
std::string supported_python_versions();

}  // namespace hangscope::capture

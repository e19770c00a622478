// Captures one process: checks it can be examined, freezes and copies threads, unwinds, symbolizes.
#pragma once

#include <sys/types.h>

#include "hangscope/capture/process_dump.h"
#include "hangscope/native/freezer.h"

namespace hangscope::capture {

struct CaptureOptions {
  native::FreezeOptions freeze;
  std::size_t max_frames = 256;
};

// Throws hangscope::Error with a one-line message naming the pid and the reason when the
// process cannot be captured at all (does not exist, zombie, kernel thread, /proc unreadable).
// Problems with single threads or files become notes in the dump instead.
ProcessDump capture_process(pid_t pid, const CaptureOptions& options);

}  // namespace hangscope::capture

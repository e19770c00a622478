// Private to capture: the thread steps of assemble_dump (capture_target.cpp), for any target —
// native stacks unwound and symbolized, Python threads matched to the threads that run them.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/capture/capture_target.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/native/freezer.h"
#include "hangscope/native/unwinder.h"
#include "hangscope/python/async_tasks.h"
#include "hangscope/python/stack_reader.h"

namespace hangscope::capture {

struct NativeStacks {
  std::vector<native::UnwindResult> walks;        // one per copy (empty when not copied)
  std::vector<std::vector<model::Frame>> frames;  // the same, symbolized
};

// Unwinds every copied thread (`memory` serves reads outside the stack copies) and symbolizes
// the stacks; laps "native unwinding" and "symbols" on `phases`.
NativeStacks unwind_and_symbolize(const std::vector<native::ThreadCopy>& copies,
                                  elf::ProcessImage& image, memory::MemoryReader* memory,
                                  std::size_t max_frames, PhaseTimer& phases);

// Which host thread runs a Python thread state: by the thread's id in its PID namespace, its
// thread pointer, or (3.10) the tid glibc keeps in struct pthread.
class ThreadMatcher {
 public:
  ThreadMatcher(const std::vector<native::ThreadCopy>& copies, memory::MemoryReader& memory);
  std::optional<pid_t> host_tid(const python::PyThread& thread);

 private:
  memory::MemoryReader& memory_;
  std::map<pid_t, pid_t> ns_to_host_;
  std::map<std::uint64_t, pid_t> by_thread_pointer_;
};

// Attaches Python threads to the native ones; a Python thread whose native thread is not
// found is kept as a thread of its own (tid 0) with a note.
void attach_python(model::ProcessDump& dump, const std::vector<python::PyThread>& py_threads,
                   ThreadMatcher& matcher, const std::string& interpreter_module,
                   StackKinds stacks);

// Gives the dump its asyncio tasks, each with the thread that runs its loop when known.
void attach_tasks(model::ProcessDump& dump, python::AsyncTasks tasks,
                  const std::vector<python::PyThread>& py_threads, ThreadMatcher& matcher);

}  // namespace hangscope::capture

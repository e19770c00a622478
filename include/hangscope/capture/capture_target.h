// What a capture reads a process from, live or a core file (`CaptureTarget`), and the one
// assembly of a ProcessDump from any target (`assemble_dump`), as pystack's
// AbstractProcessManager serves its ProcessManager and CoreFileProcessManager.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/elf/module_cache.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/native/freezer.h"

namespace hangscope::capture {

enum class StackKinds {
  kMerged,      // native + Python, merged (Python processes) or native alone
  kNativeOnly,  // no interpreter reads
  kPythonOnly,  // no thread is stopped: Python stacks read from memory while the process runs
};

// What a capture reads of a process, the same for a live process and a core.
struct ReadOptions {
  std::size_t max_native_frames = 2048;
  StackKinds stacks = StackKinds::kMerged;
  bool locals = false;  // Python locals of every frame (simple values, masked)
  bool tasks = false;   // asyncio tasks of every event loop (ProcessDump::tasks)
  // With tasks: each coroutine frame's locals too (`dump --tasks --locals`). Off for snapshots:
  // each request's own locals would keep its chain from being shared on the wire.
  bool task_locals = false;
  // Parsed ELF modules shared across the processes and samples of a node, or the cores of one
  // diagnosis (optional).
  std::shared_ptr<elf::ModuleCache> modules;
};

// What the assembly asks of a target's threads.
struct CopyRequest {
  // false (Python-only): nothing may be stopped; a live target lists its threads' /proc facts.
  bool stop = true;
  // Runs once while every thread is held at one instant (a live process in --stop-mode all; a
  // core, always), for the reads that must see that instant; may be empty. A target that never
  // holds all threads at once does not run it, and the assembly reads after the copy instead.
  std::function<void()> at_one_instant;
};

// A target's threads as unwinding needs them: registers (a live process: and a stack copy,
// and the /proc facts read before stopping; a core: its CPU times), ascending tid.
struct ThreadCopies {
  std::vector<native::ThreadCopy> threads;
  std::vector<std::string> notes;  // about the copy as a whole (threads that would not stop)
  std::chrono::nanoseconds max_paused{0};
};

// One process to capture. Everything a target gives is read through these members, so every
// step that needs no live process (interpreter, Python stacks, unwinding, symbols, merging,
// thread description) is written once, in assemble_dump.
class CaptureTarget {
 public:
  CaptureTarget(const CaptureTarget&) = delete;
  CaptureTarget& operator=(const CaptureTarget&) = delete;
  virtual ~CaptureTarget() = default;

  // What the process is.
  virtual pid_t pid() const = 0;
  virtual std::string command() const = 0;  // its comm
  // Names the target in phase logs and messages: "pid 42 (python3)", "core /tmp/core.42".
  virtual std::string label() const = 0;
  // Its mappings and modules, and its memory (the one reader every step reads through).
  virtual elf::ProcessImage& image() = 0;
  virtual memory::MemoryReader& memory() = 0;
  // What the dump says first about where it comes from (a zombie leader; which core).
  virtual std::vector<std::string> notes() const = 0;

  // The threads, as `request` asks. Throws hangscope::Error when there are none left.
  virtual ThreadCopies copy_threads(const CopyRequest& request) = 0;
  // Whether copy_threads holds every thread at one instant (and runs the request's
  // at_one_instant): a core always, a live process in --stop-mode all. Otherwise the Python
  // side is read on a second thread, beside the stop, the copy and the native unwinding.
  virtual bool holds_one_instant() const = 0;
  // Stops one thread for `while_stopped` (a second read of its Python frames): how long it was
  // paused, or nothing when it cannot be stopped (then while_stopped does not run). A core's
  // threads never run, so it has nothing to stop.
  virtual std::optional<std::chrono::nanoseconds> while_thread_stopped(
      pid_t tid, const std::function<void()>& while_stopped);

  // What the target alone knows of one thread, added to its dump once its stacks are in (a live
  // thread that would not stop: its kernel stack; a core's thread: the signal it took).
  virtual void add_thread_facts(const native::ThreadCopy& copy, model::ThreadDump& thread);
  // What the target alone knows of the process, added last (a live process: its sockets; a core:
  // files on this machine that are not the ones the process ran).
  virtual void add_process_facts(const ReadOptions& options, model::ProcessDump& dump);

  // When the target began to be opened: a dump's capture time counts from here.
  std::chrono::steady_clock::time_point began() const { return began_; }

 protected:
  CaptureTarget() = default;

 private:
  std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();
};

// The dump of any target: its interpreter and torch.distributed's groups, its threads copied (the
// Python stacks read at that instant when the target holds one, else right after, on a second
// thread that reads the groups while the threads are stopped and copied), native stacks
// unwound and symbolized, each thread described from its copy, Python threads read again while
// stopped where they moved (a target that can stop them), matched and merged, asyncio tasks, then
// the target's own facts and the notes of files that could not be opened. Throws hangscope::Error
// when the target has no threads to copy.
model::ProcessDump assemble_dump(CaptureTarget& target, const ReadOptions& options);

}  // namespace hangscope::capture

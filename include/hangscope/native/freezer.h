// Stops a process's threads briefly, copies what unwinding needs (registers, stack), releases them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/memory/memory_reader.h"
#include "hangscope/native/registers.h"
#include "hangscope/proc/maps.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/proc/task_stat.h"

namespace hangscope::native {

enum class StopMode {
  kEachThread,  // stop, copy and release each thread on its own: shortest pause per thread
  kAllThreads,  // stop every thread, copy all, release all: one consistent instant
};

struct FreezeOptions {
  StopMode mode = StopMode::kEachThread;
  std::size_t max_stack_bytes = 512 * 1024;
  // How long to wait for one thread to stop (a thread in state D may never stop).
  std::chrono::milliseconds stop_timeout{100};
  // kEachThread: how many threads are asked to stop before the first of them is waited for.
  // Their stops overlap (each thread is still copied and released on its own, in order), so a
  // thread's pause grows by at most the copies of the threads ahead of it in its batch (tens of
  // microseconds each) while the capture no longer waits for one wake-up per thread in turn.
  std::size_t each_thread_batch = 8;
  // Re-list /proc/PID/task until no new threads appear, at most this often.
  int max_list_rounds = 16;
  // Budget of the whole process: threads not reached by then are listed (state, wchan) but
  // not stopped, so one slow process cannot hold back the rest of a node's answer.
  std::chrono::milliseconds process_budget{10000};
  // kAllThreads only: runs once every thread is stopped and copied, before any is released
  // (reads that must see the process at one instant, e.g. the Python interpreter's state).
  std::function<void()> while_all_stopped;
};

// What was learned about one thread: /proc facts read before it was stopped, and the copy.
struct ThreadCopy {
  pid_t tid = 0;
  proc::TaskStat stat;  // read before stopping (state letter as the thread really was)
  std::string wchan;    // read before stopping
  std::uint64_t context_switches = 0;  // voluntary + involuntary, read before stopping
  pid_t ns_tid = 0;     // the thread's id in the process's own PID namespace (0: unknown)
  bool copied = false;  // registers and stack were copied while stopped
  std::string error;    // why not, when !copied
  RegisterSet registers;
  std::uint64_t stack_start = 0;  // target address of stack[0]
  std::vector<std::byte> stack;
  std::chrono::nanoseconds paused{0};
};

struct FreezeResult {
  std::vector<ThreadCopy> threads;  // ascending tid
  std::vector<std::string> notes;
  std::chrono::nanoseconds wall{0};
  std::chrono::nanoseconds max_paused{0};
};

// Runs the whole stop/copy/release sequence on a dedicated thread and joins it: when that
// thread exits, the kernel detaches any tracee that never reached its stop. Threads are held
// inside held windows (held_window.h): hangscope does not stop for Ctrl-Z while it holds any,
// and a watchdog kills it if it is SIGSTOPped then.
// Throws hangscope::Error when the process cannot be examined at all (its /proc is gone).
// Stacks are copied through `memory` (the process's one remote-memory reader).
FreezeResult freeze_and_copy(const proc::ProcessFs& fs, const proc::MemoryMap& maps,
                             memory::MemoryReader& memory, const FreezeOptions& options);

// Stops one thread for `while_stopped` (a second read of its Python frames), on a tracer thread
// of its own inside a held window, as freeze_and_copy does. Returns how long the thread was
// paused, or nothing when it did not stop within `timeout` (while_stopped then does not run).
// An exception of while_stopped reaches the caller after the thread is released.
std::optional<std::chrono::nanoseconds> while_thread_stopped(
    pid_t tid, std::chrono::milliseconds timeout, const std::function<void()>& while_stopped);

}  // namespace hangscope::native

#include "hangscope/capture/process_capture.h"

#include <cerrno>

#include "hangscope/common/error.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/native/symbolizer.h"
#include "hangscope/native/unwinder.h"
#include "hangscope/proc/process_fs.h"

namespace hangscope::capture {
namespace {

std::string pid_label(pid_t pid, const std::string& comm) {
  return "pid " + std::to_string(pid) + (comm.empty() ? "" : " (" + comm + ")");
}

// Refuses processes that have nothing to capture, with the reason.
proc::TaskStat check_capturable(const proc::ProcessFs& fs) {
  const pid_t pid = fs.pid();
  const auto stat = fs.task_stat(pid);
  if (!stat) throw Error("pid " + std::to_string(pid) + " does not exist");
  if (stat->flags & proc::kPfKthread) {
    throw Error(pid_label(pid, stat->comm) +
                " is a kernel thread: it has no user-space stack to capture");
  }
  if (stat->state == 'Z' || stat->state == 'X') {
    const auto tasks = fs.list_tasks();
    if (!tasks || tasks->size() <= 1) {
      throw Error(pid_label(pid, stat->comm) +
                  " is a zombie: it has exited and waits for its parent (pid " +
                  std::to_string(stat->ppid) + ") to reap it; nothing to capture");
    }
  }
  return *stat;
}

ThreadDump describe_thread(const native::ThreadCopy& copy, const proc::ProcessFs& fs) {
  ThreadDump thread;
  thread.tid = copy.tid;
  thread.name = copy.stat.comm;
  thread.state = copy.stat.state;
  thread.wchan = copy.wchan;
  thread.paused = copy.paused;
  if (!copy.copied) {
    thread.notes.push_back(copy.error);
    // What the kernel knows is all there is for a thread that could not be stopped.
    if (copy.stat.state == 'D' || copy.stat.state == 'T' || copy.stat.state == 't') {
      thread.kernel_stack = fs.task_kernel_stack(copy.tid);
    }
  }
  return thread;
}

}  // namespace

ProcessDump capture_process(pid_t pid, const CaptureOptions& options) {
  const auto begin = std::chrono::steady_clock::now();
  proc::ProcessFs fs(pid);
  const proc::TaskStat leader = check_capturable(fs);

  int error = 0;
  auto maps = proc::read_memory_map(pid, &error);
  if (!maps) throw_errno("cannot read the memory map of " + pid_label(pid, leader.comm), error);

  ProcessDump dump;
  dump.pid = pid;
  dump.command = leader.comm;
  if (leader.state == 'Z') dump.notes.push_back("the main thread has exited (zombie leader)");

  const native::FreezeResult frozen = native::freeze_and_copy(fs, *maps, options.freeze);
  dump.notes.insert(dump.notes.end(), frozen.notes.begin(), frozen.notes.end());
  dump.max_paused = frozen.max_paused;
  if (frozen.threads.empty()) throw Error(pid_label(pid, leader.comm) + " exited during capture");

  // Everything below runs after every thread was released.
  elf::ProcessImage image(fs, std::move(*maps));
  memory::ProcessMemory live(pid);
  native::Unwinder unwinder(image, &live);
  native::Symbolizer symbolizer(image);
  for (const auto& copy : frozen.threads) {
    ThreadDump thread = describe_thread(copy, fs);
    if (copy.copied) {
      const auto walk = unwinder.unwind(copy, options.max_frames);
      thread.frames = symbolizer.symbolize(walk.frames);
      if (!walk.stop_reason.empty()) thread.notes.push_back(walk.stop_reason);
    }
    dump.threads.push_back(std::move(thread));
  }
  dump.notes.insert(dump.notes.end(), image.notes().begin(), image.notes().end());
  dump.capture_time = std::chrono::steady_clock::now() - begin;
  return dump;
}

}  // namespace hangscope::capture

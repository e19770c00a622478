// A live process as a capture target: /proc, process_vm_readv, threads stopped by ptrace
// (each or all), one thread stopped again for a read, the kernel's view of a thread that would
// not stop, the process's sockets.
#include "hangscope/capture/process_capture.h"

#include <cerrno>

#include "hangscope/capture/sockets.h"
#include "hangscope/common/error.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/native/freezer.h"
#include "hangscope/native/held_window.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/python/version.h"
#include "socket_tables.h"

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

// The memory map the caller read, else /proc/PID/maps now.
proc::MemoryMap memory_map(pid_t pid, const std::string& comm,
                           std::optional<proc::MemoryMap> maps) {
  int error = 0;
  if (!maps) maps = proc::read_memory_map(pid, &error);
  if (!maps) throw_errno("cannot read the memory map of " + pid_label(pid, comm), error);
  return std::move(*maps);
}

// Python-only mode: thread facts from /proc, nothing stopped.
std::vector<native::ThreadCopy> list_without_stopping(const proc::ProcessFs& fs) {
  std::vector<native::ThreadCopy> threads;
  for (pid_t tid : fs.list_tasks().value_or(std::vector<pid_t>{})) {
    native::ThreadCopy copy;
    copy.tid = tid;
    const auto stat = fs.task_stat(tid);
    if (!stat) continue;
    copy.stat = *stat;
    copy.wchan = fs.task_wchan(tid);
    if (const auto status = fs.task_status(tid)) {
      copy.context_switches = status->voluntary_switches + status->involuntary_switches;
      if (!status->ns_pids.empty()) copy.ns_tid = status->ns_pids.back();
    }
    threads.push_back(std::move(copy));
  }
  return threads;
}

class LiveProcess final : public CaptureTarget {
 public:
  LiveProcess(pid_t pid, const CaptureOptions& options, std::optional<proc::MemoryMap> maps)
      : fs_(pid),
        leader_(check_capturable(fs_)),
        image_(fs_, memory_map(pid, leader_.comm, std::move(maps)), options.modules),
        memory_(pid),
        freeze_(options.freeze),
        sockets_(options.sockets),
        socket_tables_(options.socket_tables) {}

  pid_t pid() const override { return fs_.pid(); }
  std::string command() const override { return leader_.comm; }
  std::string label() const override { return pid_label(fs_.pid(), leader_.comm); }
  elf::ProcessImage& image() override { return image_; }
  memory::MemoryReader& memory() override { return memory_; }

  std::vector<std::string> notes() const override {
    if (leader_.state == 'Z') return {"the main thread has exited (zombie leader)"};
    return {};
  }

  ThreadCopies copy_threads(const CopyRequest& request) override {
    ThreadCopies copies;
    if (!request.stop) {
      copies.threads = list_without_stopping(fs_);
    } else {
      native::FreezeOptions freeze = freeze_;
      if (request.at_one_instant && freeze.mode == native::StopMode::kAllThreads) {
        freeze.while_all_stopped = request.at_one_instant;  // one consistent instant
      }
      native::FreezeResult frozen = native::freeze_and_copy(fs_, image_.maps(), memory_, freeze);
      copies.threads = std::move(frozen.threads);
      copies.notes = std::move(frozen.notes);
      copies.max_paused = frozen.max_paused;
    }
    if (copies.threads.empty()) {
      throw Error(label() + " exited during capture");
    }
    return copies;
  }

  bool holds_one_instant() const override { return freeze_.mode == native::StopMode::kAllThreads; }

  std::optional<std::chrono::nanoseconds> while_thread_stopped(
      pid_t tid, const std::function<void()>& while_stopped) override {
    return native::while_thread_stopped(tid, freeze_.stop_timeout, while_stopped);
  }

  // What the kernel knows is all there is for a thread that could not be stopped.
  void add_thread_facts(const native::ThreadCopy& copy, model::ThreadDump& thread) override {
    if (copy.copied || copy.error.empty()) return;
    if (copy.stat.state == 'D' || copy.stat.state == 'T' || copy.stat.state == 't') {
      thread.kernel_stack = fs_.task_kernel_stack(copy.tid);
    }
  }

  void add_process_facts(const ReadOptions&, model::ProcessDump& dump) override {
    if (sockets_) {
      dump.sockets = read_sockets(fs_.pid(), dump.notes, kMaxSockets, socket_tables_.get());
    }
  }

 private:
  proc::ProcessFs fs_;
  proc::TaskStat leader_;
  elf::ProcessImage image_;
  memory::ProcessMemory memory_;
  native::FreezeOptions freeze_;
  bool sockets_;
  std::shared_ptr<SocketTables> socket_tables_;
};

}  // namespace

std::unique_ptr<CaptureTarget> open_process(pid_t pid, const CaptureOptions& options,
                                            std::optional<proc::MemoryMap> maps) {
  return std::make_unique<LiveProcess>(pid, options, std::move(maps));
}

model::ProcessDump capture_process(pid_t pid, const CaptureOptions& options,
                                   std::optional<proc::MemoryMap> maps) {
  // Threads will be stopped: the stop watchdog is forked before this capture grows the process.
  if (options.stacks != StackKinds::kPythonOnly) native::start_stop_watchdog();
  PhaseTimer phases(pid_label(pid, "") + ", ");
  const auto target = open_process(pid, options, std::move(maps));
  phases.lap("maps read, target opened");
  return assemble_dump(*target, options);
}

std::string supported_python_versions() {
  return python::supported_versions();
}

}  // namespace hangscope::capture

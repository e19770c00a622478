#include "hangscope/capture/process_capture.h"

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include "hangscope/capture/sockets.h"
#include "hangscope/common/diagnostic.h"
#include "hangscope/common/error.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/common/redaction.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/native/freezer.h"
#include "hangscope/native/symbolizer.h"
#include "hangscope/native/unwinder.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/python/merge.h"
#include "python_session.h"
#include "thread_assembly.h"

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

model::ThreadDump describe_thread(const native::ThreadCopy& copy, const proc::ProcessFs& fs) {
  model::ThreadDump thread;
  thread.tid = copy.tid;
  thread.name = copy.stat.comm;
  thread.state = copy.stat.state;
  thread.wchan = copy.wchan;
  thread.paused = copy.paused;
  thread.context_switches = copy.context_switches;
  thread.utime_ticks = copy.stat.utime_ticks;
  thread.stime_ticks = copy.stat.stime_ticks;
  if (!copy.copied && !copy.error.empty()) {
    thread.notes.push_back(copy.error);
    // What the kernel knows is all there is for a thread that could not be stopped.
    if (copy.stat.state == 'D' || copy.stat.state == 'T' || copy.stat.state == 't') {
      thread.kernel_stack = fs.task_kernel_stack(copy.tid);
    }
  }
  return thread;
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

bool same_frames(const std::vector<python::PyFrame>& a, const std::vector<python::PyFrame>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.function == y.function && x.file == y.file && x.line == y.line;
  });
}

// The Python threads (by thread state) whose frames a second read finds changed: they ran
// while read, and a read of a running thread can follow a frame just popped and reused into a
// chain that looks whole but is not its stack.
std::set<std::uint64_t> moving_threads(const std::vector<python::PyThread>& read,
                                       PythonSession& python) {
  std::set<std::uint64_t> moving;
  std::vector<python::PyThread> again;
  try {
    again = python.read_threads(/*locals=*/false, 1);
  } catch (const Error&) {
    return moving;
  }
  for (const auto& t : read) {
    const auto it = std::find_if(again.begin(), again.end(),
                                 [&](const python::PyThread& x) { return x.tstate == t.tstate; });
    if (it == again.end() || !same_frames(t.frames, it->frames)) moving.insert(t.tstate);
  }
  return moving;
}

// A thread that runs through Python calls faster than its frames can be read (a spin loop
// calling a small function) tears live reads, some visibly (torn), some not (`moving`): such a
// thread is stopped once more, alone, for a read of its frames. Returns the longest of these
// pauses.
std::chrono::nanoseconds reread_torn_threads(std::vector<python::PyThread>& threads,
                                             const std::set<std::uint64_t>& moving,
                                             PythonSession& python, ThreadMatcher& matcher,
                                             const CaptureOptions& options) {
  std::chrono::nanoseconds longest{0};
  for (auto& thread : threads) {
    if (!python::torn(thread) && !moving.count(thread.tstate)) continue;
    const auto tid = matcher.host_tid(thread);
    if (!tid) continue;
    std::vector<python::PyThread> again;
    const auto paused = native::while_thread_stopped(*tid, options.freeze.stop_timeout, [&] {
      try {
        again = python.read_threads(options.locals, 1);
      } catch (const Error&) {
      }
    });
    if (!paused) continue;
    longest = std::max(longest, *paused);
    for (auto& t : again) {
      if (t.tstate == thread.tstate && !python::torn(t)) {
        thread = std::move(t);
        break;
      }
    }
  }
  return longest;
}

}  // namespace

model::ProcessDump capture_process(pid_t pid, const CaptureOptions& options,
                                   std::optional<proc::MemoryMap> maps) {
  const auto begin = std::chrono::steady_clock::now();
  PhaseTimer phases("capture " + std::to_string(pid) + ", ");
  proc::ProcessFs fs(pid);
  const proc::TaskStat leader = check_capturable(fs);

  int error = 0;
  if (!maps) maps = proc::read_memory_map(pid, &error);
  if (!maps) throw_errno("cannot read the memory map of " + pid_label(pid, leader.comm), error);

  model::ProcessDump dump;
  dump.pid = pid;
  dump.command = leader.comm;
  if (leader.state == 'Z') dump.notes.push_back("the main thread has exited (zombie leader)");

  elf::ProcessImage image(fs, std::move(*maps), options.modules);
  memory::ProcessMemory live(pid);

  // Find the interpreter before stopping anything: it opens files, which can wait.
  std::unique_ptr<PythonSession> python;
  if (options.stacks != StackKinds::kNativeOnly) {
    Diagnostic note;
    python = PythonSession::open(image, live, &note);
    if (python) {
      dump.python = python->interpreter().version.to_string();
      phases.lap("maps and interpreter");
      dump.distributed = python->read_process_groups();
      phases.lap("torch.distributed's process groups");
    } else if (options.stacks == StackKinds::kPythonOnly ||
               note.code != DiagnosticCode::kNotPython) {
      // A native process is no news, unless Python stacks were all that was asked for.
      dump.notes.push_back(note.text);
    }
  }
  if (!python) phases.lap("maps and interpreter");
  std::vector<python::PyThread> py_threads;
  bool python_read = false;
  std::string python_error;
  std::optional<python::AsyncTasks> tasks;
  const auto read_python = [&](int attempts) {
    try {
      py_threads = python->read_threads(options.locals, attempts);
    } catch (const Error& e) {
      python_error = e.what();
    }
    // Tasks after the threads, at the same instant when they are stopped: their thread
    // states say which thread runs which loop.
    if (options.tasks) tasks = python->read_tasks(py_threads, options.task_locals);
    python_read = true;
  };

  std::vector<native::ThreadCopy> copies;
  if (options.stacks == StackKinds::kPythonOnly) {
    copies = list_without_stopping(fs);
  } else {
    native::FreezeOptions freeze = options.freeze;
    if (python && freeze.mode == native::StopMode::kAllThreads) {
      freeze.while_all_stopped = [&] { read_python(1); };  // one consistent instant
    }
    native::FreezeResult frozen = native::freeze_and_copy(fs, image.maps(), live, freeze);
    dump.notes.insert(dump.notes.end(), frozen.notes.begin(), frozen.notes.end());
    dump.max_paused = frozen.max_paused;
    copies = std::move(frozen.threads);
  }
  if (copies.empty()) throw Error(pid_label(pid, leader.comm) + " exited during capture");
  phases.lap("threads stopped and copied");
  // Everything below runs with every thread running again.
  const bool python_read_running = python && !python_read;
  if (python_read_running) read_python(3);
  phases.lap("Python stacks");
  if (!python_error.empty()) dump.notes.push_back("Python stacks unavailable: " + python_error);

  NativeStacks native =
      unwind_and_symbolize(copies, image, &live, options.max_native_frames, phases);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    model::ThreadDump thread = describe_thread(copies[i], fs);
    if (copies[i].copied) {
      thread.native_frames = std::move(native.frames[i]);
      thread.frames = thread.native_frames;
      if (native.walks[i].end != WalkEnd::kComplete) {
        thread.notes.push_back(native.walks[i].stop_reason);
      }
    }
    dump.threads.push_back(std::move(thread));
  }
  if (python && !py_threads.empty()) {
    ThreadMatcher matcher(copies, live);
    if (options.stacks != StackKinds::kPythonOnly) {
      // Read while running (each mode): the threads that moved meanwhile are read stopped.
      const auto moving =
          python_read_running ? moving_threads(py_threads, *python) : std::set<std::uint64_t>{};
      dump.max_paused = std::max(
          dump.max_paused, reread_torn_threads(py_threads, moving, *python, matcher, options));
    }
    attach_python(dump, py_threads, matcher, python->interpreter().module_path, options.stacks);
    if (tasks) attach_tasks(dump, std::move(*tasks), py_threads, matcher);
  }
  phases.lap("threads described and merged");
  dump.sockets = read_sockets(pid, dump.notes);
  phases.lap("sockets");
  for (auto& note : image.notes()) dump.notes.push_back(std::move(note));
  dump.capture_time = std::chrono::steady_clock::now() - begin;
  return dump;
}

}  // namespace hangscope::capture

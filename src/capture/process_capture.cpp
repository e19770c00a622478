#include "hangscope/capture/process_capture.h"

#include <cerrno>
#include <map>

#include "hangscope/common/diagnostic.h"
#include "hangscope/common/error.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/common/redaction.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/native/symbolizer.h"
#include "hangscope/native/thread_stop.h"
#include "hangscope/native/unwinder.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/python/merge.h"
#include "python_session.h"

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

// Which host thread runs a Python thread state.
class ThreadMatcher {
 public:
  ThreadMatcher(const std::vector<native::ThreadCopy>& copies, memory::MemoryReader& memory)
      : memory_(memory) {
    for (const auto& copy : copies) {
      if (copy.ns_tid != 0) ns_to_host_[copy.ns_tid] = copy.tid;
      if (copy.copied) by_thread_pointer_[copy.registers.thread_pointer()] = copy.tid;
    }
  }

  std::optional<pid_t> host_tid(const python::PyThread& thread) {
    if (thread.native_thread_id) {
      const auto it = ns_to_host_.find(static_cast<pid_t>(*thread.native_thread_id));
      if (it != ns_to_host_.end()) return it->second;
    }
    if (const auto it = by_thread_pointer_.find(thread.thread_id); it != by_thread_pointer_.end()) {
      return it->second;
    }
    // 3.10 without registers: glibc (x86-64, 2.26+) keeps the kernel tid in struct pthread.
    constexpr std::uint64_t kGlibcPthreadTid = 0x2d0;
    std::int32_t tid = 0;
    if (memory_.read_exact(thread.thread_id + kGlibcPthreadTid, &tid, sizeof tid)) {
      if (const auto it = ns_to_host_.find(tid); it != ns_to_host_.end()) return it->second;
    }
    return std::nullopt;
  }

 private:
  memory::MemoryReader& memory_;
  std::map<pid_t, pid_t> ns_to_host_;
  std::map<std::uint64_t, pid_t> by_thread_pointer_;
};

// A thread that runs through Python calls faster than its frames can be read (a spin loop
// calling a small function) tears every live read: such a thread is stopped once more, alone,
// for a read of its frames. Returns the longest of these pauses.
std::chrono::nanoseconds reread_torn_threads(std::vector<python::PyThread>& threads,
                                             PythonSession& python, ThreadMatcher& matcher,
                                             const CaptureOptions& options) {
  std::chrono::nanoseconds longest{0};
  for (auto& thread : threads) {
    if (!python::torn(thread)) continue;
    const auto tid = matcher.host_tid(thread);
    if (!tid) continue;
    native::ThreadStop stop(*tid);
    if (stop.seize_and_interrupt() != 0 ||
        stop.wait(options.freeze.stop_timeout) != native::StopState::kStopped) {
      continue;
    }
    std::vector<python::PyThread> again;
    try {
      again = python.read_threads(options.locals, 1);
    } catch (const Error&) {
    }
    longest = std::max(longest, stop.paused_for());
    stop.release();
    for (auto& t : again) {
      if (t.tstate == thread.tstate && !python::torn(t)) {
        thread = std::move(t);
        break;
      }
    }
  }
  return longest;
}

void mask_locals(std::vector<model::Frame>& frames) {
  for (auto& frame : frames) {
    for (auto& [name, value] : frame.locals) value = mask_if_secret(name, value);
  }
}

// Gives one thread its Python frames and, unless Python-only, the merged view.
void fill_python(model::ThreadDump& thread, const python::PyThread& py,
                 const std::string& interpreter_module, StackKinds stacks) {
  thread.py_thread_id = py.thread_id;
  thread.py_thread_name = py.name;
  thread.holds_gil = py.holds_gil;
  for (const auto& f : py.frames) thread.python_frames.push_back(python::to_frame(f));
  mask_locals(thread.python_frames.edit());
  if (py.error) thread.notes.push_back("Python stack: " + py.error->text);
  if (stacks == StackKinds::kPythonOnly) {
    thread.frames = thread.python_frames;
    return;
  }
  auto merged = python::merge_stacks(thread.native_frames, py.frames, interpreter_module);
  mask_locals(merged.frames);
  thread.frames = std::move(merged.frames);
  thread.merge = merged.merge;
}

// Attaches Python threads to the native ones; a Python thread whose native thread is not
// found is kept as a thread of its own (tid 0) with a note.
void attach_python(model::ProcessDump& dump, const std::vector<python::PyThread>& py_threads,
                   ThreadMatcher& matcher, const std::string& interpreter_module,
                   StackKinds stacks) {
  std::map<pid_t, model::ThreadDump*> by_tid;
  for (auto& t : dump.threads) by_tid[t.tid] = &t;
  std::vector<const python::PyThread*> unmatched;
  for (const auto& py : py_threads) {
    const auto tid = matcher.host_tid(py);
    if (tid && by_tid.count(*tid)) {
      fill_python(*by_tid[*tid], py, interpreter_module, stacks);
    } else {
      unmatched.push_back(&py);
    }
  }
  for (const auto* py : unmatched) {
    dump.notes.push_back("Python thread " + std::to_string(py->thread_id) +
                         " matches no thread of the process (it may have exited)");
    model::ThreadDump thread;
    fill_python(thread, *py, interpreter_module, StackKinds::kPythonOnly);
    dump.threads.push_back(std::move(thread));
  }
}

// Gives the dump its asyncio tasks, each with the thread that runs its loop when known.
void attach_tasks(model::ProcessDump& dump, python::AsyncTasks tasks,
                  const std::vector<python::PyThread>& py_threads, ThreadMatcher& matcher) {
  std::map<std::uint64_t, pid_t> thread_of_loop;
  for (const auto& [loop, tstate] : tasks.loop_threads) {
    for (const auto& py : py_threads) {
      if (py.tstate != tstate) continue;
      if (const auto tid = matcher.host_tid(py)) thread_of_loop[loop] = *tid;
    }
  }
  for (auto& task : tasks.tasks) {
    if (const auto it = thread_of_loop.find(task.loop); it != thread_of_loop.end()) {
      task.tid = it->second;
    }
  }
  for (auto& note : tasks.notes) dump.notes.push_back("asyncio tasks: " + note);
  dump.tasks = std::move(tasks.tasks);
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
    if (options.tasks) tasks = python->read_tasks(py_threads);
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
  if (python && !python_read) read_python(3);
  phases.lap("Python stacks");
  if (!python_error.empty()) dump.notes.push_back("Python stacks unavailable: " + python_error);

  native::Unwinder unwinder(image, &live);
  std::vector<native::UnwindResult> walks(copies.size());
  std::vector<const std::vector<native::RawFrame>*> stacks;
  for (std::size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].copied) walks[i] = unwinder.unwind(copies[i], options.max_native_frames);
    stacks.push_back(&walks[i].frames);
  }
  phases.lap("native unwinding");
  auto symbolized = native::Symbolizer(image).symbolize_stacks(stacks);
  phases.lap("symbols");
  for (std::size_t i = 0; i < copies.size(); ++i) {
    model::ThreadDump thread = describe_thread(copies[i], fs);
    if (copies[i].copied) {
      thread.native_frames = std::move(symbolized[i]);
      thread.frames = thread.native_frames;
      if (walks[i].end != WalkEnd::kComplete) thread.notes.push_back(walks[i].stop_reason);
    }
    dump.threads.push_back(std::move(thread));
  }
  if (python && !py_threads.empty()) {
    ThreadMatcher matcher(copies, live);
    if (options.stacks != StackKinds::kPythonOnly) {
      dump.max_paused =
          std::max(dump.max_paused, reread_torn_threads(py_threads, *python, matcher, options));
    }
    attach_python(dump, py_threads, matcher, python->interpreter().module_path, options.stacks);
    if (tasks) attach_tasks(dump, std::move(*tasks), py_threads, matcher);
  }
  phases.lap("threads described and merged");
  for (auto& note : image.notes()) dump.notes.push_back(std::move(note));
  dump.capture_time = std::chrono::steady_clock::now() - begin;
  return dump;
}

}  // namespace hangscope::capture

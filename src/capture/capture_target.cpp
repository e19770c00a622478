// The one assembly of a ProcessDump from any capture target, live or core: every step that
// needs no live process.
#include "hangscope/capture/capture_target.h"

#include <algorithm>
#include <exception>
#include <future>
#include <set>
#include <system_error>
#include <thread>

#include "hangscope/common/diagnostic.h"
#include "hangscope/common/error.h"
#include "hangscope/common/phase_timer.h"
#include "python_session.h"
#include "thread_assembly.h"

namespace hangscope::capture {

std::optional<std::chrono::nanoseconds> CaptureTarget::while_thread_stopped(
    pid_t, const std::function<void()>&) {
  return std::nullopt;
}

void CaptureTarget::add_thread_facts(const native::ThreadCopy&, model::ThreadDump&) {}

void CaptureTarget::add_process_facts(const ReadOptions&, model::ProcessDump&) {}

namespace {

// The interpreter and its version; nullptr when there is none (with a note, unless a native
// process is no news).
std::unique_ptr<PythonSession> open_python(CaptureTarget& target, const ReadOptions& options,
                                           model::ProcessDump& dump, PhaseTimer& phases) {
  if (options.stacks == StackKinds::kNativeOnly) return nullptr;
  Diagnostic note;
  auto python = PythonSession::open(target.image(), target.memory(), &note);
  if (python) {
    dump.python = python->interpreter().version.to_string();
    phases.lap("interpreter");
  } else if (options.stacks == StackKinds::kPythonOnly || note.code != DiagnosticCode::kNotPython) {
    // A native process is no news, unless Python stacks were all that was asked for.
    dump.notes.push_back(note.text);
  }
  return python;
}

// The Python threads and asyncio tasks, and when and how they were read.
struct PythonRead {
  std::vector<python::PyThread> threads;
  std::optional<python::AsyncTasks> tasks;
  std::string error;            // why the threads could not be read
  bool done = false;            // read (at one instant, or after the copy)
  bool at_one_instant = false;  // while every thread was held still
};

void read_python(PythonSession& python, const ReadOptions& options, int attempts,
                 PythonRead& read) {
  try {
    read.threads = python.read_threads(options.locals, attempts);
  } catch (const Error& e) {
    read.error = e.what();
  }
  // Tasks after the threads, at the same instant when they are held: their thread states say
  // which thread runs which loop.
  if (options.tasks) read.tasks = python.read_tasks(read.threads, options.task_locals);
  read.done = true;
}

// The Python side of a capture, read on its own thread beside the native side: torch.distributed's
// groups at once (while the threads are stopped and copied: memory reads only, and the groups
// come first because the threads' locals name them), then the Python threads and tasks once the
// copy ended, while the native stacks are unwound and symbolized. Never reads while a thread is
// held; for a target that holds every thread at one instant the reads stay in that instant.
class PythonBeside {
 public:
  PythonBeside(PythonSession& python, const ReadOptions& options, const std::string& label)
      : worker_([this, &python, &options, label] { run(python, options, label); }) {}
  PythonBeside(const PythonBeside&) = delete;
  PythonBeside& operator=(const PythonBeside&) = delete;
  // A capture that failed before finish(): the side reads no threads and is joined.
  ~PythonBeside() {
    if (!worker_.joinable()) return;
    signal(false);
    worker_.join();
  }

  // Every thread runs again: the Python threads may be read.
  void copy_ended() { signal(true); }

  // Waits for the side: the groups (dump.distributed) and the threads' read; rethrows what the
  // group read threw, as the capture did before it had a second thread.
  std::optional<model::DistributedState> finish(PythonRead& read) {
    signal(true);
    worker_.join();
    if (failure_) std::rethrow_exception(failure_);
    read = std::move(read_);
    return std::move(groups_);
  }

 private:
  void signal(bool read_threads) {
    if (signalled_) return;
    signalled_ = true;
    copied_.set_value(read_threads);
  }

  void run(PythonSession& python, const ReadOptions& options, const std::string& label) {
    try {
      PhaseTimer phases(label + ", beside the stop: ");
      groups_ = python.read_process_groups(options.tasks);
      phases.lap("torch.distributed's process groups");
      if (!copied_signal_.get()) return;
      phases.lap("the copy, waited for");
      read_python(python, options, 3, read_);
      phases.lap("Python stacks");
    } catch (...) {
      failure_ = std::current_exception();
    }
  }

  std::promise<bool> copied_;  // true: read the threads; false: the capture failed
  std::future<bool> copied_signal_ = copied_.get_future();
  bool signalled_ = false;
  PythonRead read_;
  std::optional<model::DistributedState> groups_;
  std::exception_ptr failure_;
  std::thread worker_;  // last: it starts once every member above exists
};

// The Python side on a second thread, when the target's threads are stopped one by one (not held
// at one instant) and native stacks are wanted; nullptr when it reads in line (or no thread can
// be started).
std::unique_ptr<PythonBeside> start_python_beside(CaptureTarget& target, PythonSession* python,
                                                  const ReadOptions& options) {
  if (python == nullptr || target.holds_one_instant() ||
      options.stacks == StackKinds::kPythonOnly) {
    return nullptr;
  }
  try {
    return std::make_unique<PythonBeside>(*python, options, target.label());
  } catch (const std::system_error&) {
    return nullptr;  // no thread to spare: read in line
  }
}

// The threads, with the Python stacks read at the instant they were held when the target holds
// one: one read, the threads stand still.
ThreadCopies copy_threads(CaptureTarget& target, const ReadOptions& options, PythonSession* python,
                          PythonRead& read) {
  CopyRequest request;
  request.stop = options.stacks != StackKinds::kPythonOnly;
  if (python) {
    request.at_one_instant = [&] {
      read_python(*python, options, 1, read);
      read.at_one_instant = true;
    };
  }
  return target.copy_threads(request);
}

// A thread as its copy describes it: what /proc said before it was stopped (a core: its CPU
// times, state unknown), and why it was not copied.
model::ThreadDump describe_thread(const native::ThreadCopy& copy) {
  model::ThreadDump thread;
  thread.tid = copy.tid;
  thread.name = copy.stat.comm;
  thread.state = copy.stat.state;
  thread.wchan = copy.wchan;
  thread.paused = copy.paused;
  thread.context_switches = copy.context_switches;
  thread.utime_ticks = copy.stat.utime_ticks;
  thread.stime_ticks = copy.stat.stime_ticks;
  if (!copy.copied && !copy.error.empty()) thread.notes.push_back(copy.error);
  return thread;
}

// Every thread of the dump, with its native stack when it was unwound and the target's facts.
void describe_threads(CaptureTarget& target, const std::vector<native::ThreadCopy>& copies,
                      NativeStacks& native, model::ProcessDump& dump) {
  for (std::size_t i = 0; i < copies.size(); ++i) {
    model::ThreadDump thread = describe_thread(copies[i]);
    if (copies[i].copied && !native.frames.empty()) {
      thread.native_frames = std::move(native.frames[i]);
      thread.frames = thread.native_frames;
      if (native.walks[i].end != WalkEnd::kComplete) {
        thread.notes.push_back(native.walks[i].stop_reason);
      }
    }
    target.add_thread_facts(copies[i], thread);
    dump.threads.push_back(std::move(thread));
  }
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
// thread is stopped once more, alone, for a read of its frames, when the target can stop it.
// Returns the longest of these pauses.
std::chrono::nanoseconds reread_torn_threads(CaptureTarget& target,
                                             std::vector<python::PyThread>& threads,
                                             const std::set<std::uint64_t>& moving,
                                             PythonSession& python, ThreadMatcher& matcher,
                                             const ReadOptions& options) {
  std::chrono::nanoseconds longest{0};
  for (auto& thread : threads) {
    if (!python::torn(thread) && !moving.count(thread.tstate)) continue;
    const auto tid = matcher.host_tid(thread);
    if (!tid) continue;
    std::vector<python::PyThread> again;
    const auto paused = target.while_thread_stopped(*tid, [&] {
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

// Python threads matched to the threads that run them and merged with their native stacks, and
// the asyncio tasks; a thread read while running that moved is first read again while stopped
// (never in Python-only mode, which stops nothing).
void attach_python_threads(CaptureTarget& target, const std::vector<native::ThreadCopy>& copies,
                           PythonSession& python, PythonRead& read, const ReadOptions& options,
                           model::ProcessDump& dump) {
  ThreadMatcher matcher(copies, target.memory());
  if (options.stacks != StackKinds::kPythonOnly) {
    const auto moving =
        read.at_one_instant ? std::set<std::uint64_t>{} : moving_threads(read.threads, python);
    dump.max_paused = std::max(dump.max_paused, reread_torn_threads(target, read.threads, moving,
                                                                    python, matcher, options));
  }
  attach_python(dump, read.threads, matcher, python.interpreter().module_path, options.stacks);
  if (read.tasks) attach_tasks(dump, std::move(*read.tasks), read.threads, matcher);
}

}  // namespace

model::ProcessDump assemble_dump(CaptureTarget& target, const ReadOptions& options) {
  PhaseTimer phases(target.label() + ", ");
  model::ProcessDump dump;
  dump.pid = target.pid();
  dump.command = target.command();
  dump.notes = target.notes();
  // The interpreter before any thread stops: finding it opens files, which can wait.
  const auto python = open_python(target, options, dump, phases);
  auto beside = start_python_beside(target, python.get(), options);
  if (python && !beside) {
    dump.distributed = python->read_process_groups(options.tasks);
    phases.lap("torch.distributed's process groups");
  }
  PythonRead read;
  ThreadCopies copies = copy_threads(target, options, beside ? nullptr : python.get(), read);
  dump.notes.insert(dump.notes.end(), copies.notes.begin(), copies.notes.end());
  dump.max_paused = copies.max_paused;
  phases.lap("threads copied");
  // Everything below runs with every thread running again.
  if (beside) {
    beside->copy_ended();
  } else if (python && !read.done) {
    read_python(*python, options, 3, read);
    phases.lap("Python stacks");
  }
  NativeStacks native;
  if (options.stacks != StackKinds::kPythonOnly) {
    native = unwind_and_symbolize(copies.threads, target.image(), &target.memory(),
                                  options.max_native_frames, phases);
  }
  if (beside) {
    dump.distributed = beside->finish(read);
    phases.lap("the Python side, waited for");
  }
  if (!read.error.empty()) dump.notes.push_back("Python stacks unavailable: " + read.error);
  describe_threads(target, copies.threads, native, dump);
  if (python && !read.threads.empty()) {
    attach_python_threads(target, copies.threads, *python, read, options, dump);
  }
  if (python) python->add_groups_found(dump.distributed);
  phases.lap("threads described and merged");
  target.add_process_facts(options, dump);
  phases.lap("the target's own facts");
  for (auto& note : target.image().notes()) dump.notes.push_back(std::move(note));
  dump.capture_time = std::chrono::steady_clock::now() - target.began();
  return dump;
}

}  // namespace hangscope::capture

#include "thread_assembly.h"

#include <algorithm>

#include "hangscope/common/redaction.h"
#include "hangscope/native/symbolizer.h"
#include "hangscope/python/merge.h"

namespace hangscope::capture {

NativeStacks unwind_and_symbolize(const std::vector<native::ThreadCopy>& copies,
                                  elf::ProcessImage& image, memory::MemoryReader* memory,
                                  std::size_t max_frames, PhaseTimer& phases) {
  NativeStacks out;
  native::Unwinder unwinder(image, memory);
  out.walks.resize(copies.size());
  std::vector<const std::vector<native::RawFrame>*> stacks;
  for (std::size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].copied) out.walks[i] = unwinder.unwind(copies[i], max_frames);
    stacks.push_back(&out.walks[i].frames);
  }
  phases.lap("native unwinding");
  out.frames = native::Symbolizer(image).symbolize_stacks(stacks);
  phases.lap("symbols");
  return out;
}

ThreadMatcher::ThreadMatcher(const std::vector<native::ThreadCopy>& copies,
                             memory::MemoryReader& memory)
    : memory_(memory) {
  for (const auto& copy : copies) {
    if (copy.ns_tid != 0) ns_to_host_[copy.ns_tid] = copy.tid;
    if (copy.copied) by_thread_pointer_[copy.registers.thread_pointer()] = copy.tid;
  }
}

std::optional<pid_t> ThreadMatcher::host_tid(const python::PyThread& thread) {
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

namespace {

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
  std::vector<model::Frame> python_frames;
  for (const auto& f : py.frames) python_frames.push_back(python::to_frame(f));
  mask_locals(python_frames);
  thread.python_frames = std::move(python_frames);
  if (py.error) thread.notes.push_back("Python stack: " + py.error->text);
  if (stacks == StackKinds::kPythonOnly) {
    thread.frames = thread.python_frames;
    return;
  }
  auto merged =
      python::merge_stacks(thread.native_frames.to_vector(), py.frames, interpreter_module);
  mask_locals(merged.frames);
  thread.frames = std::move(merged.frames);
  thread.merge = merged.merge;
}

}  // namespace

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
    const auto& chain = task.coroutine;
    if (std::any_of(chain.begin(), chain.end(), [](const auto& f) { return !f.locals.empty(); })) {
      task.coroutine.edit(mask_locals);
    }
  }
  for (auto& note : tasks.notes) dump.notes.push_back("asyncio tasks: " + note);
  dump.tasks = std::move(tasks.tasks);
}

}  // namespace hangscope::capture

#include "python_session.h"

#include <algorithm>

#include "hangscope/common/error.h"
#include "hangscope/memory/page_cache.h"
#include "hangscope/python/process_groups.h"

namespace hangscope::capture {

std::unique_ptr<PythonSession> PythonSession::open(elf::ProcessImage& image,
                                                   memory::MemoryReader& memory, Diagnostic* note) {
  auto search = python::find_interpreter(image, memory);
  if (!search.interpreter) {
    *note = std::move(search.problem);
    return nullptr;
  }
  const auto& interpreter = *search.interpreter;
  std::optional<python::Layout> layout = python::builtin_layout(interpreter.version);
  if (!layout) {
    const std::size_t size = python::debug_offsets_size(interpreter.version);
    std::vector<std::byte> table(size);
    if (size == 0) {
      *note = {DiagnosticCode::kPythonUnsupported,
               "Python " + interpreter.version.to_string() + " is not supported (known: " +
                   python::supported_versions() + "): native stacks only"};
      return nullptr;
    }
    if (!memory.read_exact(interpreter.runtime_address, table.data(), table.size())) {
      *note = {
          DiagnosticCode::kPythonUnreadable,
          "cannot read the _Py_DebugOffsets table of Python " + interpreter.version.to_string()};
      return nullptr;
    }
    try {
      layout = python::layout_from_debug_offsets(table);
    } catch (const Error& e) {
      *note = {DiagnosticCode::kPythonUnsupported, std::string(e.what()) + ": native stacks only"};
      return nullptr;
    }
  }
  return std::unique_ptr<PythonSession>(
      new PythonSession(interpreter, std::move(*layout), image, memory));
}

namespace {

bool any_torn(const std::vector<python::PyThread>& threads) {
  return std::any_of(threads.begin(), threads.end(),
                     [](const python::PyThread& t) { return python::torn(t); });
}

// Two reads of running threads agree when every thread's outermost frame is the same: a
// thread that runs changes its innermost frames between reads, but a read that caught a frame
// being pushed or popped ends its chain early (a one-frame stack of a helper function).
bool same_outer_frames(const std::vector<python::PyThread>& a,
                       const std::vector<python::PyThread>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].tstate != b[i].tstate || a[i].frames.empty() != b[i].frames.empty()) return false;
    if (a[i].frames.empty()) continue;
    const auto& x = a[i].frames.back();
    const auto& y = b[i].frames.back();
    if (x.function != y.function || x.file != y.file) return false;
  }
  return true;
}

}  // namespace

std::vector<python::PyThread> PythonSession::read_threads(bool locals, int attempts, bool names) {
  python::StackReaderOptions options;
  options.locals = locals;
  options.codes = &codes_;
  options.thread_names = names;
  if (locals) {
    if (!groups_found_) {
      groups_found_ = std::make_unique<python::GroupDiscovery>(image_, group_labels_);
    }
    options.observer = groups_found_.get();
  }
  const auto read = [&] {
    memory::PageCache pages(memory_);  // one instant's pages per read
    python::ObjectReader objects(pages, maps_, layout_);
    objects.set_labels(&group_labels_);
    python::StackReader reader(objects, interpreter_.runtime_address, options);
    return reader.read_threads();
  };
  std::vector<python::PyThread> threads = read();
  // One attempt: the threads are stopped (one consistent instant), the read is taken as is.
  // Otherwise they run: a read is taken when it has no torn frame and a second read agrees
  // on every thread's outermost frame.
  for (int attempt = 1; attempt < attempts; ++attempt) {
    auto again = read();
    const bool settled = !any_torn(again) && same_outer_frames(threads, again);
    threads = std::move(again);
    if (settled) break;
  }
  return threads;
}

std::optional<model::DistributedState> PythonSession::read_process_groups(bool tasks) {
  memory::PageCache pages(memory_);
  python::ObjectReader objects(pages, maps_, layout_);
  // One walk of sys.modules for the groups' modules and, when tasks will be read, asyncio's.
  auto names = python::ProcessGroupReader::modules_read();
  if (tasks) names.push_back(python::AsyncTaskReader::kTasksModule);
  auto modules = objects.find_modules(interpreter_.runtime_address, names);
  if (tasks) {
    const auto it = modules.find(std::string(python::AsyncTaskReader::kTasksModule));
    tasks_module_ = it == modules.end() ? std::nullopt : std::optional(it->second);
    // 3.14's table is found in _asyncio's ELF sections: looked up now, before any thread is
    // stopped (a tasks read at one instant holds them all).
    if (layout_.version.at_least(3, 14)) asyncio_debug_ = python::read_asyncio_debug(image_, pages);
  }
  auto state =
      python::ProcessGroupReader(objects, interpreter_.runtime_address, std::move(modules)).read();
  if (state) group_labels_ = python::ProcessGroupReader::labels(*state);
  return state;
}

void PythonSession::refresh_sequences(model::DistributedState& state) {
  memory::PageCache pages(memory_);
  python::ObjectReader objects(pages, maps_, layout_);
  python::ProcessGroupReader::refresh_sequences(objects, state);
}

void PythonSession::add_groups_found(std::optional<model::DistributedState>& state) {
  if (!groups_found_ || groups_found_->empty()) return;
  {
    memory::PageCache pages(memory_);
    python::ObjectReader objects(pages, maps_, layout_);
    groups_found_->read_stores(objects);
  }
  if (!state) state.emplace();
  groups_found_->add_to(*state);
}

std::optional<python::AsyncTasks> PythonSession::read_tasks(
    const std::vector<python::PyThread>& threads, bool locals) {
  memory::PageCache pages(memory_);
  python::ObjectReader objects(pages, maps_, layout_);
  if (!tasks_module_) {
    tasks_module_ =
        python::AsyncTaskReader(objects, interpreter_.runtime_address).find_tasks_module();
  }
  if (!*tasks_module_) return std::nullopt;  // asyncio was not imported when the capture began
  std::vector<std::uint64_t> tstates;
  for (const auto& t : threads) tstates.push_back(t.tstate);
  python::AsyncTasksOptions options;
  options.locals = locals;
  if (layout_.version.at_least(3, 14)) {
    if (!asyncio_debug_) asyncio_debug_ = python::read_asyncio_debug(image_, pages);
    options.asyncio_debug = *asyncio_debug_;
  }
  python::AsyncTaskReader reader(objects, interpreter_.runtime_address, std::move(options));
  return reader.read(tstates, *tasks_module_);
}

}  // namespace hangscope::capture

// asyncio tasks read from another process's memory, without running code in it: every Task in
// asyncio's registries (3.14+: the task lists of the thread and interpreter states), its name
// and state, the coroutine chain it is suspended in (followed
// the way CPython's _PyGen_yf computes cr_await) and the future or task it awaits; and which
// thread runs each event loop (docs/python-capture.md, "asyncio tasks").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hangscope/model/process_dump.h"
#include "hangscope/python/asyncio_debug.h"
#include "hangscope/python/asyncio_layout.h"
#include "hangscope/python/objects.h"
#include "hangscope/python/stack_reader.h"

namespace hangscope::python {

struct AsyncTasksOptions {
  std::size_t max_tasks = 100000;
  std::size_t max_chain = 256;  // coroutines followed per task
  bool locals = false;          // each coroutine frame's simple local values (masked)
  // 3.14+: _asyncio's table of offsets as found in the target (read_asyncio_debug).
  AsyncioDebugTable asyncio_debug;
};

struct AsyncTasks {
  std::vector<model::AsyncTask> tasks;  // tid unset: see loop_threads
  // Event loop → the thread state running it (asyncio's running loop of that thread).
  std::map<std::uint64_t, std::uint64_t> loop_threads;
  std::vector<std::string> notes;  // what could not be read
};

class AsyncTaskReader {
 public:
  AsyncTaskReader(ObjectReader& objects, std::uint64_t runtime_address,
                  AsyncTasksOptions options = {});

  // The name of the module whose registries hold the tasks, for a caller that walks sys.modules
  // for it with others (ObjectReader::find_modules).
  static constexpr std::string_view kTasksModule = "asyncio.tasks";

  // The module object asyncio.tasks (one pass over sys.modules); nullopt when never imported.
  std::optional<std::uint64_t> find_tasks_module();

  // nullopt when asyncio.tasks was never imported. `tstates`: the thread states whose running
  // loops (3.14+: and task lists) are read. `module`: asyncio.tasks when the caller found it
  // already (else it is looked up). Throws nothing: what cannot be read becomes a note.
  std::optional<AsyncTasks> read(const std::vector<std::uint64_t>& tstates,
                                 std::optional<std::uint64_t> module = std::nullopt);

 private:
  void add_registry(std::uint64_t set, bool weak, bool eager, std::vector<std::uint64_t>& order,
                    std::map<std::uint64_t, bool>& found);
  // 3.10-3.13: the registries in asyncio.tasks' globals, and _current_tasks.
  void read_registries(std::uint64_t globals, std::vector<std::uint64_t>& order,
                       std::map<std::uint64_t, bool>& found, AsyncTasks& out);
  // 3.14+: the circular task list whose sentinel node is at `head`; false when it is broken.
  bool add_task_list(std::uint64_t head, std::vector<std::uint64_t>& order,
                     std::map<std::uint64_t, bool>& found);
  void read_task_lists(const std::vector<std::uint64_t>& tstates, std::vector<std::uint64_t>& order,
                       std::map<std::uint64_t, bool>& found, AsyncTasks& out);
  std::vector<std::uint64_t> set_keys(std::uint64_t set);
  bool is_task(std::uint64_t object);
  bool has_base(std::uint64_t object, std::string_view type_name);
  std::optional<std::uint64_t> running_loop(std::uint64_t tstate);
  model::AsyncTask read_task(std::uint64_t task);
  std::string task_name(std::uint64_t name);
  // Appends the coroutine chain from `coro` (outermost first) to frames, through the async
  // generators that `async for`, asend, athrow and aclose drive; returns the object
  // the innermost coroutine awaits (0: none), and sets *executing when a coroutine runs.
  std::uint64_t follow_chain(std::uint64_t coro, std::vector<model::Frame>& frames, bool* executing,
                             std::vector<std::string>& notes);
  // The frame of a generator, coroutine or async generator and its state (PyFrameState);
  // nullopt once it has finished.
  std::optional<std::pair<std::uint64_t, int>> generator_frame(std::uint64_t gen);
  // The object a suspended generator awaits (its yield-from target), 0 when none.
  std::uint64_t yield_from(std::uint64_t gen, std::uint64_t frame, int state);
  std::uint64_t stack_top(std::uint64_t frame);
  // kEmbedded: how many slots of localsplus are in use (locals and stack), 0 when unreadable.
  std::uint64_t stack_depth(std::uint64_t frame);

  ObjectReader& objects_;
  const Layout& layout_;
  std::vector<std::string> layout_notes_;  // how the asyncio layout was chosen
  std::optional<AsyncioLayout> asyncio_;
  std::uint64_t runtime_;
  AsyncTasksOptions options_;
  StackReader frames_;
  std::map<std::uint64_t, bool> task_types_;        // type → a _asyncio.Task (sub)class
  std::map<std::uint64_t, std::uint64_t> current_;  // loop → its running task
};

}  // namespace hangscope::python

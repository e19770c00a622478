// Where asyncio keeps its tasks, and where a coroutine keeps what it awaits, per CPython version:
// the C _asyncio module's TaskObj and FutureIter, generator/coroutine/async generator objects,
// their frames and the awaitables an async generator's asend/athrow/aclose return, the
// registries asyncio.tasks holds (3.14+: the task lists of thread and interpreter states, at
// offsets _asyncio publishes in its .AsyncioDebug section), and where a thread's running loop
// lives (docs/python-capture.md, "asyncio tasks").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "hangscope/python/layout.h"

namespace hangscope::python {

// Which registries of asyncio.tasks hold the tasks.
enum class TaskRegistry {
  kAllTasks,           // 3.10/3.11: _all_tasks, a WeakSet
  kScheduledAndEager,  // 3.12/3.13: _scheduled_tasks (WeakSet) and _eager_tasks (set)
  // 3.14+: no registry object; each native task is linked (TaskObj.task_node) into the circular
  // list _PyThreadStateImpl.asyncio_tasks_head of the thread that created it, and moved to
  // PyInterpreterState.asyncio_tasks_head when that thread state is cleared.
  kThreadLists,
};

// How a generator or coroutine object leads to its frame.
enum class CoroutineFrame {
  kFrameObject,  // 3.10: gi_frame, a PyFrameObject* (NULL once finished); f_state in the frame
  kEmbedded,     // 3.11+: gi_iframe, an _PyInterpreterFrame inside the object; gi_frame_state
};

// How CPython decides that a suspended generator is inside `yield from` / `await`
// (_PyGen_yf), so that the top of its value stack is the object it awaits.
enum class YieldFromTest {
  kYieldFromOpcode,   // 3.10: the instruction after f_lasti is YIELD_FROM
  kResumeAfterYield,  // 3.11/3.12: the code unit after prev_instr is RESUME with oparg >= 2
  kSuspendedState,    // 3.13+: gi_frame_state == FRAME_SUSPENDED_YIELD_FROM
};

// Where a thread keeps the event loop it runs (asyncio._set_running_loop).
enum class RunningLoopPlace {
  kThreadDict,   // 3.10-3.12: PyThreadState.dict["__asyncio_running_event_loop__"]
  kThreadState,  // 3.13+: _PyThreadStateImpl.asyncio_running_loop
};

struct AsyncioLayout {
  TaskRegistry registry = TaskRegistry::kAllTasks;
  CoroutineFrame coroutine_frame = CoroutineFrame::kEmbedded;
  YieldFromTest yield_from = YieldFromTest::kSuspendedState;
  RunningLoopPlace running_loop = RunningLoopPlace::kThreadDict;

  // Frame states (PyFrameState): a frame is suspended when its state is below `executing` and
  // not `created`; above it, it has finished.
  int state_created = -2;
  int state_executing = 0;
  int state_suspended_yield_from = -1;  // YieldFromTest::kSuspendedState

  // Generator / coroutine / async generator objects (PyGenObject, PyCoroObject,
  // PyAsyncGenObject: the same head)
  std::optional<FieldOffset<RemoteAddress>> gen_frame_object;  // kFrameObject: gi_frame
  std::optional<FieldOffset<RemoteAddress>> gen_code;          // kFrameObject: gi_code
  // 3.10: the code object has no co_qualname; the generator's gi_qualname names it.
  std::optional<FieldOffset<RemoteAddress>> gen_qualname;
  std::uint64_t gen_iframe = 0;                                  // kEmbedded: gi_iframe
  std::optional<FieldOffset<std::int8_t>> gen_frame_state;       // kEmbedded
  std::optional<FieldOffset<std::int8_t>> frame_object_state;    // kFrameObject: f_state
  std::optional<FieldOffset<RemoteAddress>> frame_valuestack;    // kFrameObject
  std::optional<FieldOffset<std::int32_t>> frame_stackdepth;     // kFrameObject
  std::optional<FieldOffset<std::int32_t>> frame_stacktop;       // 3.11-3.13: index in localsplus
  std::optional<FieldOffset<RemoteAddress>> frame_stackpointer;  // 3.14+: past the stack's top
  std::optional<FieldOffset<RemoteAddress>> code_code;           // kYieldFromOpcode: co_code
  std::uint8_t yield_from_opcode = 72;                           // kYieldFromOpcode
  std::vector<std::uint8_t> resume_opcodes;  // kResumeAfterYield: RESUME and its variants

  // Threads
  std::optional<FieldOffset<RemoteAddress>> tstate_dict;          // kThreadDict
  std::optional<FieldOffset<RemoteAddress>> tstate_running_loop;  // kThreadState
  // kThreadLists: the running task (_PyThreadStateImpl.asyncio_running_task) and the heads of
  // the task lists (struct llist_node {next, prev}: a sentinel; next leads round to it again).
  std::optional<FieldOffset<RemoteAddress>> tstate_running_task;
  std::optional<std::uint64_t> tstate_tasks_head;
  std::optional<std::uint64_t> interp_tasks_head;  // unknown without the .AsyncioDebug table
  // 3.10/3.11: the dict holds a _RunningLoopHolder {PyObject_HEAD, rl_loop, rl_pid}.
  std::optional<FieldOffset<RemoteAddress>> running_loop_holder_loop;

  // Sets (PySetObject; setentry = {key, hash}) and weak references (PyWeakReference)
  FieldOffset<std::int64_t> set_mask{32};
  FieldOffset<RemoteAddress> set_table{40};
  std::uint64_t set_entry_size = 16;
  FieldOffset<RemoteAddress> weakref_object{16};  // wr_object (Py_None once dead)
  FieldOffset<RemoteAddress> type_base{256};      // PyTypeObject.tp_base

  // _asyncio.Task (TaskObj, FutureObj_HEAD(task)) and _asyncio.FutureIter
  FieldOffset<RemoteAddress> task_loop{16};  // task_loop
  FieldOffset<std::int32_t> task_state;  // task_state (fut_state: 0 pending, 1 cancelled, 2 done)
  FieldOffset<RemoteAddress> task_fut_waiter;
  FieldOffset<RemoteAddress> task_coro;
  FieldOffset<RemoteAddress> task_name;  // a str, or an int until get_name() runs (3.12+)
  std::uint64_t task_node = 0;           // kThreadLists: the task's llist_node
  FieldOffset<RemoteAddress> future_iter_future{16};

  // What `async for` (__anext__, asend) and athrow/aclose await: async_generator_asend
  // (PyAsyncGenASend.ags_gen) and async_generator_athrow (PyAsyncGenAThrow.agt_gen), the async
  // generator they drive; right after PyObject_HEAD on 3.10 to 3.14.
  FieldOffset<RemoteAddress> async_gen_step_gen{16};
};

// The asyncio layout of the interpreter whose layout is given; nullopt for versions whose tasks
// hangscope does not read. For 3.14 these are the built-in numbers of a default (GIL) x86-64
// build of 3.14.0, used when the process's own table cannot be read.
std::optional<AsyncioLayout> asyncio_layout(const Layout& layout);

// _asyncio's Py_AsyncioModuleDebugOffsets (3.14+), 13 uint64: asyncio_task_object {size,
// task_name, task_awaited_by, task_is_task, task_awaited_by_is_set, task_coro, task_node},
// asyncio_interpreter_state {size, asyncio_tasks_head}, asyncio_thread_state {size,
// asyncio_running_loop, asyncio_running_task, asyncio_tasks_head}.
inline constexpr std::size_t kAsyncioDebugSize = 13 * 8;

// The 3.14+ asyncio layout with the offsets of the table (the fields it lacks derived from its
// neighbours in TaskObj, so that builds with a larger object head work too); throws
// hangscope::Error naming the field when a size or offset is implausible.
AsyncioLayout asyncio_layout_from_debug(const Layout& layout, std::span<const std::byte> table);

}  // namespace hangscope::python

#include "hangscope/python/asyncio_layout.h"

#include <cstring>
#include <string>

#include "hangscope/common/error.h"

namespace hangscope::python {
namespace {

// Offsets from CPython's Modules/_asynciomodule.c (FutureObj_HEAD, TaskObj, futureiterobject),
// Include/cpython/genobject.h / pycore_genobject.h, frameobject.h and pycore_frame.h at each
// release, measured against each installed interpreter (tests/integration/asyncio_tasks_test.cpp
// compares the tasks read with what the interpreter reports about itself).

AsyncioLayout layout_310() {
  AsyncioLayout a;
  a.registry = TaskRegistry::kAllTasks;
  a.coroutine_frame = CoroutineFrame::kFrameObject;
  a.yield_from = YieldFromTest::kYieldFromOpcode;
  a.running_loop = RunningLoopPlace::kThreadDict;
  a.state_created = -2;
  a.gen_frame_object = FieldOffset<RemoteAddress>(16);
  a.gen_code = FieldOffset<RemoteAddress>(24);
  a.gen_qualname = FieldOffset<RemoteAddress>(48);  // after gi_weakreflist, gi_name
  a.frame_object_state = FieldOffset<std::int8_t>(108);
  a.frame_valuestack = FieldOffset<RemoteAddress>(64);
  a.frame_stackdepth = FieldOffset<std::int32_t>(80);
  a.code_code = FieldOffset<RemoteAddress>(48);
  a.yield_from_opcode = 72;
  a.tstate_dict = FieldOffset<RemoteAddress>(152);
  a.running_loop_holder_loop = FieldOffset<RemoteAddress>(16);
  // FutureObj_HEAD: loop, callback0, context0, callbacks, exception, result, source_tb,
  // cancel_msg, state, log_tb, blocking, dict, weakreflist, cancelled_exc_state; then TaskObj's
  // fut_waiter, coro, name, context.
  a.task_state = FieldOffset<std::int32_t>(88);
  a.task_fut_waiter = FieldOffset<RemoteAddress>(152);
  a.task_coro = FieldOffset<RemoteAddress>(160);
  a.task_name = FieldOffset<RemoteAddress>(168);
  return a;
}

// 3.11+: the frame lives inside the generator; its value stack ends at localsplus[stacktop].
void embedded_frames(AsyncioLayout& a, std::uint64_t iframe, std::uint64_t frame_state) {
  a.coroutine_frame = CoroutineFrame::kEmbedded;
  a.gen_iframe = iframe;
  a.gen_frame_state = FieldOffset<std::int8_t>(frame_state);
  a.frame_stacktop = FieldOffset<std::int32_t>(64);
}

AsyncioLayout layout_311() {
  AsyncioLayout a;
  a.registry = TaskRegistry::kAllTasks;
  embedded_frames(a, 80, 75);  // after gi_code, weakreflist, name, qualname, exc_state, origin
  a.yield_from = YieldFromTest::kResumeAfterYield;
  a.resume_opcodes = {151, 150};  // RESUME, RESUME_QUICK
  a.state_created = -2;
  a.running_loop = RunningLoopPlace::kThreadDict;
  a.tstate_dict = FieldOffset<RemoteAddress>(128);
  a.running_loop_holder_loop = FieldOffset<RemoteAddress>(16);
  // FutureObj_HEAD gained exception_tb; cancelled_exc replaced cancelled_exc_state.
  a.task_state = FieldOffset<std::int32_t>(88);
  a.task_fut_waiter = FieldOffset<RemoteAddress>(128);
  a.task_coro = FieldOffset<RemoteAddress>(136);
  a.task_name = FieldOffset<RemoteAddress>(144);
  return a;
}

AsyncioLayout layout_312() {
  AsyncioLayout a;
  a.registry = TaskRegistry::kScheduledAndEager;
  embedded_frames(a, 72, 67);  // gi_code left the head
  a.yield_from = YieldFromTest::kResumeAfterYield;
  a.resume_opcodes = {151, 240};  // RESUME, INSTRUMENTED_RESUME
  a.state_created = -2;
  a.running_loop = RunningLoopPlace::kThreadDict;
  a.tstate_dict = FieldOffset<RemoteAddress>(112);
  a.task_state = FieldOffset<std::int32_t>(88);
  a.task_fut_waiter = FieldOffset<RemoteAddress>(128);
  a.task_coro = FieldOffset<RemoteAddress>(136);
  a.task_name = FieldOffset<RemoteAddress>(144);
  return a;
}

AsyncioLayout layout_313() {
  AsyncioLayout a;
  a.registry = TaskRegistry::kScheduledAndEager;
  embedded_frames(a, 72, 67);
  a.yield_from = YieldFromTest::kSuspendedState;
  a.state_created = -3;
  a.state_suspended_yield_from = -1;
  a.running_loop = RunningLoopPlace::kThreadState;
  a.tstate_running_loop = FieldOffset<RemoteAddress>(304);  // right after PyThreadState base
  // FutureObj_HEAD gained awaited_by; the task's bit fields moved before fut_waiter.
  a.task_state = FieldOffset<std::int32_t>(96);
  a.task_fut_waiter = FieldOffset<RemoteAddress>(112);
  a.task_coro = FieldOffset<RemoteAddress>(120);
  a.task_name = FieldOffset<RemoteAddress>(128);
  return a;
}

// The offsets _asyncio publishes (Py_AsyncioModuleDebugOffsets) and those derived from them.
struct TaskOffsets {
  std::uint64_t awaited_by, coro, name, node;
};
struct ThreadOffsets {
  std::uint64_t running_loop, running_task, tasks_head;
};

// In FutureObj_HEAD, _awaited_by follows ten pointers from _loop on and precedes fut_state;
// TaskObj's task_fut_waiter is the pointer before task_coro (3.14's Modules/_asynciomodule.c).
void set_task_offsets(AsyncioLayout& a, const TaskOffsets& task) {
  a.task_loop = FieldOffset<RemoteAddress>(task.awaited_by - 80);
  a.task_state = FieldOffset<std::int32_t>(task.awaited_by + 8);
  a.task_fut_waiter = FieldOffset<RemoteAddress>(task.coro - 8);
  a.task_coro = FieldOffset<RemoteAddress>(task.coro);
  a.task_name = FieldOffset<RemoteAddress>(task.name);
  a.task_node = task.node;
}

void set_thread_offsets(AsyncioLayout& a, const ThreadOffsets& thread) {
  a.tstate_running_loop = FieldOffset<RemoteAddress>(thread.running_loop);
  a.tstate_running_task = FieldOffset<RemoteAddress>(thread.running_task);
  a.tstate_tasks_head = thread.tasks_head;
}

// 3.14 (default build, x86-64, from its headers): TaskObj is 168 bytes with task_node at 152;
// _PyThreadStateImpl holds asyncio_running_loop, asyncio_running_task and asyncio_tasks_head
// after PyThreadState (824 bytes), refcount and the three C stack limits. The interpreter's
// list is not read without the table: its offset depends on too much of PyInterpreterState.
AsyncioLayout layout_314() {
  AsyncioLayout a;
  a.registry = TaskRegistry::kThreadLists;
  embedded_frames(a, 72, 67);  // the generator head is 3.13's
  a.frame_stacktop.reset();
  a.frame_stackpointer = FieldOffset<RemoteAddress>(64);  // _PyStackRef *stackpointer
  a.yield_from = YieldFromTest::kSuspendedState;
  a.state_created = -3;
  a.state_suspended_yield_from = -1;
  a.running_loop = RunningLoopPlace::kThreadState;
  set_task_offsets(a, {.awaited_by = 96, .coro = 128, .name = 136, .node = 152});
  set_thread_offsets(a, {.running_loop = 856, .running_task = 864, .tasks_head = 872});
  return a;
}

// Py_AsyncioModuleDebugOffsets as it lies in the target (13 uint64).
struct PublishedOffsets {
  std::uint64_t task_size, task_name, task_awaited_by, task_is_task, task_awaited_by_is_set,
      task_coro, task_node;
  std::uint64_t interp_size, interp_head;
  std::uint64_t ts_size, ts_loop, ts_task, ts_head;
};
static_assert(sizeof(PublishedOffsets) == kAsyncioDebugSize);

// Bounds for the table's numbers: every offset lies inside its structure, and no structure is
// larger than any 3.14 build makes it (TaskObj is ~170 bytes, _PyThreadStateImpl a few KiB, a
// free-threaded one tens of KiB, PyInterpreterState a few hundred KiB).
constexpr std::uint64_t kMaxTaskSize = 4096;
constexpr std::uint64_t kMaxThreadStateSize = std::uint64_t{1} << 20;
constexpr std::uint64_t kMaxInterpreterSize = std::uint64_t{16} << 20;

void check_offset(const char* name, std::uint64_t offset, std::uint64_t width, std::uint64_t size) {
  if (offset % 8 != 0 && width >= 8) {
    throw Error(std::string(".AsyncioDebug: ") + name + " (" + std::to_string(offset) +
                ") is not pointer-aligned");
  }
  if (offset > size || width > size - offset) {
    throw Error(std::string(".AsyncioDebug: ") + name + " (" + std::to_string(offset) +
                ") lies outside its structure (" + std::to_string(size) + " bytes)");
  }
}

void check_size(const char* name, std::uint64_t size, std::uint64_t most) {
  if (size == 0 || size > most) {
    throw Error(std::string(".AsyncioDebug: implausible size of ") + name + " (" +
                std::to_string(size) + " bytes)");
  }
}

// The derived fields need FutureObj_HEAD's order: ten pointers from _loop to _awaited_by after
// the object head, fut_state and _is_task right after, then the task's pointers in order.
void check_task_order(const PublishedOffsets& t) {
  if (t.task_awaited_by >= 96 && t.task_is_task == t.task_awaited_by + 12 &&
      t.task_coro >= t.task_awaited_by + 24 && t.task_name == t.task_coro + 8 &&
      t.task_node > t.task_name) {
    return;
  }
  throw Error(".AsyncioDebug: task offsets out of TaskObj's order (awaited_by " +
              std::to_string(t.task_awaited_by) + ", is_task " + std::to_string(t.task_is_task) +
              ", coro " + std::to_string(t.task_coro) + ", name " + std::to_string(t.task_name) +
              ", node " + std::to_string(t.task_node) + ")");
}

}  // namespace

AsyncioLayout asyncio_layout_from_debug(const Layout& layout, std::span<const std::byte> table) {
  if (!layout.version.at_least(3, 14)) {
    throw Error(".AsyncioDebug is read for CPython 3.14+ only, not " + layout.version.to_string());
  }
  if (table.size() < kAsyncioDebugSize) throw Error(".AsyncioDebug table is truncated");
  PublishedOffsets t;
  std::memcpy(&t, table.data(), sizeof t);
  check_size("asyncio_task_object", t.task_size, kMaxTaskSize);
  check_size("asyncio_interpreter_state", t.interp_size, kMaxInterpreterSize);
  check_size("asyncio_thread_state", t.ts_size, kMaxThreadStateSize);
  check_offset("task_name", t.task_name, 8, t.task_size);
  check_offset("task_awaited_by", t.task_awaited_by, 8, t.task_size);
  check_offset("task_is_task", t.task_is_task, 1, t.task_size);
  check_offset("task_awaited_by_is_set", t.task_awaited_by_is_set, 1, t.task_size);
  check_offset("task_coro", t.task_coro, 8, t.task_size);
  check_offset("task_node", t.task_node, 16, t.task_size);
  check_offset("interpreter asyncio_tasks_head", t.interp_head, 16, t.interp_size);
  check_offset("asyncio_running_loop", t.ts_loop, 8, t.ts_size);
  check_offset("asyncio_running_task", t.ts_task, 8, t.ts_size);
  check_offset("thread asyncio_tasks_head", t.ts_head, 16, t.ts_size);
  check_task_order(t);
  AsyncioLayout a = layout_314();
  set_task_offsets(a, {.awaited_by = t.task_awaited_by,
                       .coro = t.task_coro,
                       .name = t.task_name,
                       .node = t.task_node});
  set_thread_offsets(
      a, {.running_loop = t.ts_loop, .running_task = t.ts_task, .tasks_head = t.ts_head});
  a.interp_tasks_head = t.interp_head;
  return a;
}

std::optional<AsyncioLayout> asyncio_layout(const Layout& layout) {
  if (layout.version.major != 3) return std::nullopt;
  switch (layout.version.minor) {
    case 10:
      return layout_310();
    case 11:
      return layout_311();
    case 12:
      return layout_312();
    case 13:
      return layout_313();
    case 14:
      return layout_314();
    default:
      return std::nullopt;
  }
}

}  // namespace hangscope::python

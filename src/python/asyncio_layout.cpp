#include "hangscope/python/asyncio_layout.h"

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

}  // namespace

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
    default:
      return std::nullopt;
  }
}

}  // namespace hangscope::python

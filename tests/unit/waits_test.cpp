// The wait-point tables (src/waits/wait_point.cpp): which innermost native and Python frames
// say a thread waits, for what (collective, store, rendezvous, channel, ring, lock, sleep), and
// which frame names it; then which thread speaks for a process. Stacks as captures give them,
// innermost first.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis_builders.h"
#include "hangscope/waits/wait_point.h"

namespace hangscope::waits {
namespace {

using analysis::testing_builders::method;
using analysis::testing_builders::native;
using analysis::testing_builders::py;
using analysis::testing_builders::thread;

const std::string kTorch = "/usr/lib/python3/dist-packages/torch/distributed/";
const std::string kC10dFile = kTorch + "distributed_c10d.py";
const std::string kStdlib = "/usr/lib/python3.11/";
const std::string kApp = "/srv/app/serve.py";

WaitPoint classify(std::vector<model::Frame> frames, char state = 'S') {
  return classify_thread(thread(100, state, std::move(frames)));
}

// One native frame alone: what the generic and the specific tables make of a symbol.
struct NativeCase {
  std::string symbol;
  WaitKind kind;
  std::string operation;
};

TEST(WaitTables, NativeSymbolsAsCapturesNameThem) {
  const std::vector<NativeCase> cases = {
      // glibc's futex and condition variable waits, under the decorations symbols carry
      {"__futex_abstimed_wait_common", WaitKind::kLock, "futex_abstimed_wait_common"},
      {"__GI___futex_abstimed_wait_common64", WaitKind::kLock, "futex_abstimed_wait_common64"},
      {"pthread_cond_wait@@GLIBC_2.3.2", WaitKind::kLock, "pthread_cond_wait"},
      {"__pthread_cond_timedwait", WaitKind::kLock, "pthread_cond_timedwait"},
      {"std::condition_variable::wait(std::unique_lock<std::mutex>&)", WaitKind::kLock,
       "std::condition_variable::wait"},
      {"__lll_lock_wait", WaitKind::kLock, "lll_lock_wait"},
      {"sem_wait@GLIBC_2.2.5", WaitKind::kLock, "sem_wait"},
      {"take_gil", WaitKind::kLock, "take_gil"},
      // sleeps and I/O waits
      {"__GI___clock_nanosleep", WaitKind::kSleep, "clock_nanosleep"},
      {"__GI___poll", WaitKind::kSleep, "poll"},
      {"epoll_wait", WaitKind::kSleep, "epoll_wait"},
      {"__libc_recv", WaitKind::kSleep, "recv"},
      {"__GI___wait4", WaitKind::kSleep, "wait4"},
      // torch's stores: the key a rank waits for
      {"c10d::TCPStore::doWait(c10::ArrayRef<std::string>, std::chrono::duration<long, "
       "std::ratio<1l, 1000l> >)",
       WaitKind::kStore, "store.wait"},
      {"c10d::TCPStore::doGet(std::string const&)", WaitKind::kStore, "store.get"},
      {"c10d::PrefixStore::wait(std::vector<std::string> const&)", WaitKind::kStore, "store.wait"},
      // gloo, NCCL and the work objects torch waits on
      {"gloo::barrier(gloo::BarrierOptions&)", WaitKind::kCollective, "gloo barrier"},
      {"gloo::allreduce(gloo::AllreduceOptions const&)", WaitKind::kCollective, "gloo allreduce"},
      {"gloo::transport::tcp::UnboundBuffer::waitRecv(int*, std::chrono::duration<long, "
       "std::ratio<1l, 1000l> >)",
       WaitKind::kCollective, "gloo wait"},
      {"c10d::ProcessGroupGloo::AsyncWork::wait(std::chrono::duration<long, std::ratio<1l, "
       "1000l> >)",
       WaitKind::kCollective, "gloo wait"},
      {"c10d::ProcessGroupNCCL::WorkNCCL::synchronize()", WaitKind::kCollective, "nccl wait"},
      {"ncclGroupEnd", WaitKind::kCollective, "nccl"},
      {"c10d::symmetric_memory::rendezvous(at::Tensor const&)", WaitKind::kRendezvous,
       "symmetric-memory rendezvous"},
      // Ray's channels and object store
      {"ray::experimental::MutableObjectManager::ReadAcquire(ray::ObjectID const&)",
       WaitKind::kChannel, "ray channel read"},
      {"ray::core::CoreWorker::GetObjects(std::vector<ray::ObjectID> const&)", WaitKind::kChannel,
       "ray.get"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.symbol);
    const auto w = classify({native(c.symbol)});
    EXPECT_EQ(w.kind, c.kind) << to_string(w.kind);
    EXPECT_EQ(w.operation, c.operation);
    EXPECT_EQ(w.primitive, c.symbol);  // the frame as captured, for people to find
    EXPECT_FALSE(w.python.has_value());
  }
}

// Generic names are compared whole, after the decorations: a function that only contains one is
// no wait; the specific table matches fragments of qualified C++ names.
TEST(WaitTables, GenericNamesMatchWholeNotAsPrefixes) {
  for (const std::string symbol : {"epoll_wait_custom", "pollster", "my_sleep", "readv_all",
                                   "at::native::addmm_out(at::Tensor const&)", ""}) {
    SCOPED_TRACE(symbol);
    const auto w = classify({native(symbol)});
    EXPECT_EQ(w.kind, WaitKind::kOther);
    EXPECT_EQ(w.primitive, "");
    EXPECT_EQ(w.operation, "");
  }
}

// A gloo barrier as a rank's waiting thread shows it: glibc's futex innermost, then gloo's
// buffer wait, then gloo::barrier. A wait on peers beats the generic futex under it, and the
// innermost peer-facing frame names it.
TEST(WaitTables, AGlooBarrierIsACollectiveNotAFutex) {
  const auto w = classify({native("__futex_abstimed_wait_common"),
                           native("gloo::transport::tcp::UnboundBuffer::waitRecv(int*)"),
                           native("gloo::barrier(gloo::BarrierOptions&)"),
                           native("c10d::ProcessGroupGloo::AsyncBarrierWork::run()")});
  EXPECT_EQ(w.kind, WaitKind::kCollective);
  EXPECT_TRUE(waits_on_peers(w.kind));
  EXPECT_EQ(w.primitive, "gloo::transport::tcp::UnboundBuffer::waitRecv(int*)");
  EXPECT_EQ(w.operation, "gloo wait");
  EXPECT_EQ(w.describe(), "gloo wait (gloo::transport::tcp::UnboundBuffer::waitRecv(int*))");
}

// The Python frame of the same tier names the operation; the caller is the first frame outside
// torch, Ray and the standard library (torch's own c10d_logger wrapper is passed over).
TEST(WaitTables, ThePythonCollectiveNamesTheOperationAndTheUsersCallSite) {
  const auto w = classify({native("__futex_abstimed_wait_common"),
                           native("c10d::ProcessGroupGloo::AsyncWork::wait()"),
                           py("all_reduce", kC10dFile, 2050, {{"group", "None"}}),
                           py("wrapper", kTorch + "c10d_logger.py", 83),
                           method("Engine.decode_step", kApp, 41), py("<module>", kApp, 90)});
  EXPECT_EQ(w.kind, WaitKind::kCollective);
  EXPECT_EQ(w.primitive, "all_reduce");
  EXPECT_EQ(w.operation, "all_reduce");
  ASSERT_TRUE(w.python.has_value());
  EXPECT_EQ(w.python->text(), "all_reduce (torch/distributed/distributed_c10d.py:2050)");
  ASSERT_TRUE(w.caller.has_value());
  EXPECT_EQ(w.caller->text(), "Engine.decode_step (app/serve.py:41)");
  EXPECT_EQ(w.describe(),
            "all_reduce (torch/distributed/distributed_c10d.py:2050) <- Engine.decode_step "
            "(app/serve.py:41)");
  EXPECT_EQ(w.arguments(), "group: the default group (world)");
}

// One Python rule per kind that waits on peers, as vLLM, torch and Ray name them.
struct PythonCase {
  std::string function;
  std::string file;
  WaitKind kind;
  std::string operation;
};

TEST(WaitTables, PythonFunctionsOfTorchVllmAndRayWaitOnPeers) {
  const std::string site = "/opt/venv/lib/python3.12/site-packages/";
  const std::vector<PythonCase> cases = {
      {"barrier", kC10dFile, WaitKind::kCollective, "barrier"},
      {"broadcast_object_list", kC10dFile, WaitKind::kCollective, "broadcast_object_list"},
      {"recv", kC10dFile, WaitKind::kChannel, "recv"},
      {"_store_based_barrier", kC10dFile, WaitKind::kStore, "store-based barrier"},
      {"init_process_group", kC10dFile, WaitKind::kRendezvous, "init_process_group"},
      {"rendezvous", kTorch + "_symmetric_memory/__init__.py", WaitKind::kRendezvous,
       "symmetric-memory rendezvous"},
      {"_env_rendezvous_handler", kTorch + "rendezvous.py", WaitKind::kRendezvous,
       "store rendezvous"},
      {"acquire_read", site + "vllm/distributed/device_communicators/shm_broadcast.py",
       WaitKind::kRing, "acquire_read"},
      {"read", site + "ray/experimental/channel/shared_memory_channel.py", WaitKind::kChannel,
       "read"},
      {"get", site + "ray/_private/worker.py", WaitKind::kChannel, "get"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.function + " in " + c.file);
    const auto w =
        classify({native("__GI___poll"), py(c.function, c.file, 10), py("main", kApp, 5)});
    EXPECT_EQ(w.kind, c.kind) << to_string(w.kind);
    EXPECT_TRUE(waits_on_peers(w.kind));
    EXPECT_EQ(w.operation, c.operation);
    EXPECT_EQ(w.primitive, c.function);  // not the poll under it
  }
}

// queue.Queue.get over threading.Condition.wait over a futex: a lock wait. The innermost
// Python wait names it; the caller is the user's function, not queue.py (standard library).
TEST(WaitTables, AQueueGetIsALockWaitInConditionWait) {
  const auto w = classify(
      {native("__futex_abstimed_wait_common"), native("PyThread_acquire_lock_timed"),
       method("Condition.wait", kStdlib + "threading.py", 324),
       method("Queue.get", kStdlib + "queue.py", 171), method("Worker.next_request", kApp, 77)});
  EXPECT_EQ(w.kind, WaitKind::kLock);
  EXPECT_FALSE(waits_on_peers(w.kind));
  EXPECT_EQ(w.primitive, "wait");
  ASSERT_TRUE(w.python.has_value());
  EXPECT_EQ(w.python->qualname, "Condition.wait");
  ASSERT_TRUE(w.caller.has_value());
  EXPECT_EQ(w.caller->qualname, "Worker.next_request");
}

// A user's own function named like a collective is not one: the path decides.
TEST(WaitTables, AUsersBarrierIsNoCollective) {
  const auto w = classify({py("barrier", "/srv/app/sync.py", 12), py("main", kApp, 5)});
  EXPECT_EQ(w.kind, WaitKind::kOther);
  EXPECT_EQ(w.primitive, "");
  ASSERT_TRUE(w.python.has_value());  // still says where the thread is
  EXPECT_EQ(w.python->function, "barrier");
}

// A wait on peers anywhere on the stack beats a generic wait inside it: a rank that sleeps
// inside its all_reduce (gloo's polling) waits for the collective.
TEST(WaitTables, APeerWaitBeatsTheGenericWaitInsideIt) {
  const auto w = classify({native("__GI___clock_nanosleep"), py("sleep", "<built-in>", 0),
                           py("all_reduce", kC10dFile, 2050), py("main", kApp, 5)});
  EXPECT_EQ(w.kind, WaitKind::kCollective);
  EXPECT_EQ(w.primitive, "all_reduce");
}

model::ProcessDump process_of(std::vector<model::ThreadDump> threads) {
  model::ProcessDump dump;
  dump.pid = threads.front().tid;
  dump.threads = std::move(threads);
  return dump;
}

// Spins: a rank polling NCCL (state R inside ncclGroupEnd or WorkNCCL::synchronize) still waits
// for its peers, while a rank spinning in Python with no known primitive (vLLM's custom
// all-reduce on broken P2P) works, as far as its stack says.
TEST(ProcessWaitPoint, AnNcclSpinWaitsOnPeersAPythonSpinWorks) {
  const auto nccl = process_wait_point(process_of({thread(
      10, 'R', {native("ncclGroupEnd"), py("all_reduce", kC10dFile, 2050), py("main", kApp, 5)})}));
  EXPECT_EQ(nccl.kind, WaitKind::kCollective);
  EXPECT_EQ(nccl.operation, "all_reduce");

  const auto sync = process_wait_point(
      process_of({thread(10, 'R', {native("c10d::ProcessGroupNCCL::WorkNCCL::synchronize()")})}));
  EXPECT_EQ(sync.kind, WaitKind::kCollective);
  EXPECT_EQ(sync.operation, "nccl wait");

  const std::string custom =
      "/opt/venv/lib/python3.12/site-packages/vllm/distributed/device_communicators/"
      "custom_all_reduce.py";
  const auto spin = process_wait_point(process_of(
      {thread(10, 'R',
              {method("CustomAllreduce.all_reduce", custom, 300),
               method("CustomAllreduce.custom_all_reduce", custom, 330), py("main", kApp, 5)})}));
  EXPECT_EQ(spin.kind, WaitKind::kCpu);
  EXPECT_EQ(spin.operation, "running");
}

// A thread with no wait on its stack: running (R), in the kernel (D: its wchan), or unknown.
TEST(ProcessWaitPoint, ANonWaitFrameIsWorkUnknownOrTheKernelsWait) {
  const std::vector<model::Frame> compute = {native("at::native::addmm_out(at::Tensor const&)"),
                                             py("forward", "/srv/app/model.py", 51),
                                             py("main", kApp, 5)};
  EXPECT_EQ(process_wait_point(process_of({thread(10, 'R', compute)})).kind, WaitKind::kCpu);
  EXPECT_EQ(process_wait_point(process_of({thread(10, 'S', compute)})).kind, WaitKind::kOther);
  auto in_kernel = thread(10, 'D', compute);
  in_kernel.wchan = "pipe_read";
  const auto d = process_wait_point(process_of({in_kernel}));
  EXPECT_EQ(d.kind, WaitKind::kOther);
  EXPECT_EQ(d.primitive, "pipe_read");
  EXPECT_EQ(d.operation, "uninterruptible sleep");
}

// The thread that speaks for a rank: one waiting on peers beats the main thread's generic wait;
// threads without Python are the runtime's helpers once any thread runs Python.
TEST(ProcessWaitPoint, TheThreadWaitingOnPeersSpeaksForTheRank) {
  const auto main_thread = thread(10, 'S', {native("epoll_wait"), py("run_forever", kApp, 20)});
  const auto worker = thread(12, 'S',
                             {native("gloo::barrier(gloo::BarrierOptions&)"),
                              py("barrier", kC10dFile, 3152), py("run", kApp, 40)});
  const auto helper = thread(13, 'S', {native("c10d::TCPStore::doWait()")});  // no Python
  const auto w = process_wait_point(process_of({main_thread, worker, helper}));
  EXPECT_EQ(w.tid, 12);
  EXPECT_EQ(w.kind, WaitKind::kCollective);
  EXPECT_EQ(w.operation, "barrier");
  // Without the worker the main thread's sleep speaks, not the helper's store wait.
  const auto without = process_wait_point(process_of({main_thread, helper}));
  EXPECT_EQ(without.tid, 10);
  EXPECT_EQ(without.kind, WaitKind::kSleep);
}

TEST(WaitTables, ShortPathsAndStableKindNames) {
  EXPECT_EQ(short_path(kC10dFile), "torch/distributed/distributed_c10d.py");
  EXPECT_EQ(short_path("/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py"),
            "vllm/v1/engine/core.py");
  EXPECT_EQ(short_path("/srv/app/tools/train.py"), "tools/train.py");
  EXPECT_EQ(short_path("train.py"), "train.py");
  EXPECT_EQ(to_string(WaitKind::kCollective), "collective");
  EXPECT_EQ(to_string(WaitKind::kStore), "store");
  EXPECT_EQ(to_string(WaitKind::kRendezvous), "rendezvous");
  EXPECT_EQ(to_string(WaitKind::kChannel), "channel");
  EXPECT_EQ(to_string(WaitKind::kRing), "ring");
  EXPECT_EQ(to_string(WaitKind::kLock), "lock");
  EXPECT_EQ(to_string(WaitKind::kSleep), "sleep");
  EXPECT_EQ(to_string(WaitKind::kCpu), "cpu");
  EXPECT_EQ(to_string(WaitKind::kOther), "other");
  for (const auto kind : {WaitKind::kLock, WaitKind::kSleep, WaitKind::kCpu, WaitKind::kOther}) {
    EXPECT_FALSE(waits_on_peers(kind)) << to_string(kind);
  }
}

}  // namespace
}  // namespace hangscope::waits

// asyncio tasks of CPython 3.14 (no 3.14 interpreter on this machine): read from a memory image
// built to 3.14's layout (python314_image.h) with tasks on two thread states' task lists and on
// the interpreter's, through the reader the capture uses, with _asyncio's .AsyncioDebug table,
// a shifted one, absurd ones and none; and the .AsyncioDebug section found by hangscope in a
// real shared library loaded into a child process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/proc/maps.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/python/async_tasks.h"
#include "hangscope/python/asyncio_debug.h"
#include "python314_image.h"
#include "target_process.h"

namespace hangscope::python {
namespace {

using namespace image314;

constexpr std::uint64_t kAsync = 0x10800000;       // loops, futures, names, tasks, coroutines
constexpr std::uint64_t kAsyncTypes = 0x10900000;  // type objects, 0x200 apart
constexpr std::uint64_t kAsyncCode = 0x10a00000;   // code objects, then their strings
constexpr std::uint64_t kThread2 = kThread + 0x800;
constexpr std::uint64_t kModule = kAsync + 0x800;  // asyncio.tasks (only its address is used)

enum TypeIndex : std::uint64_t { kTask, kCoroutine, kFuture, kFutureIter, kInt, kLoop };
constexpr std::uint64_t type_at(TypeIndex t) {
  return kAsyncTypes + 0x200 * t;
}

constexpr std::uint64_t kLoop1 = kAsync, kLoop2 = kAsync + 0x40, kLoop3 = kAsync + 0x80;
constexpr std::uint64_t kFuture1 = kAsync + 0x100, kIter1 = kAsync + 0x180, kSeven = kAsync + 0x200;
constexpr std::uint64_t task_at(int i) {
  return kAsync + 0x1000 + 0x400 * i;
}
constexpr std::uint64_t coro_at(int i) {
  return kAsync + 0x3000 + 0x400 * i;
}
constexpr std::uint64_t kServer = task_at(0), kHandler = task_at(1), kConsumer = task_at(2),
                        kOrphan = task_at(3);

// Where the image puts asyncio's fields, and the table _asyncio would publish for them.
struct Offsets {
  std::uint64_t task_size = 168, awaited_by = 96, is_task = 108, coro = 128, name = 136, node = 152;
  std::uint64_t interp_size = 8192, interp_head = 7800;
  std::uint64_t tstate_size = 896, running_loop = 856, running_task = 864, tstate_head = 872;

  std::vector<std::byte> table() const {
    const std::uint64_t v[13] = {task_size,    name,         awaited_by,  is_task,     is_task + 1,
                                 coro,         node,         interp_size, interp_head, tstate_size,
                                 running_loop, running_task, tstate_head};
    std::vector<std::byte> bytes(sizeof v);
    std::memcpy(bytes.data(), v, sizeof v);
    return bytes;
  }
  // A build whose object head is 16 bytes larger and whose thread state has one more field.
  Offsets shifted() const {
    Offsets o = *this;
    for (auto* f : {&o.task_size, &o.awaited_by, &o.is_task, &o.coro, &o.name, &o.node}) *f += 16;
    for (auto* f : {&o.tstate_size, &o.running_loop, &o.running_task, &o.tstate_head}) *f += 8;
    return o;
  }
};

AsyncioDebugTable found(std::vector<std::byte> bytes) {
  AsyncioDebugTable table;
  table.bytes = std::move(bytes);
  table.module_path = "/opt/python3.14/lib/python3.14/lib-dynload/_asyncio.cpython-314.so";
  return table;
}

bool has_note(const AsyncTasks& tasks, const std::string& part) {
  return std::any_of(tasks.notes.begin(), tasks.notes.end(),
                     [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

const model::AsyncTask* task_named(const AsyncTasks& tasks, const std::string& name) {
  for (const auto& t : tasks.tasks) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

class Asyncio314Image : public Python314Image {
 protected:
  void SetUp() override {
    Python314Image::SetUp();
    image.region(kAsync, 0x8000);
    image.region(kAsyncTypes, 0x1000);
    image.region(kAsyncCode, 0x8000);
    write_type(kTask, "_asyncio.Task");
    write_type(kCoroutine, "coroutine");
    write_type(kFuture, "_asyncio.Future");
    write_type(kFutureIter, "_asyncio.FutureIter");
    write_type(kInt, "int");
    write_type(kLoop, "_UnixSelectorEventLoop");
    for (const std::uint64_t loop : {kLoop1, kLoop2, kLoop3}) image.put(loop + 8, type_at(kLoop));
    image.put(kFuture1 + 8, type_at(kFuture));
    image.put(kIter1 + 8, type_at(kFutureIter));
    image.put(kIter1 + 16, kFuture1);      // futureiterobject.future
    image.put(kSeven + 8, type_at(kInt));  // 7: one digit, lv_tag = 1 << 3
    image.put(kSeven + 16, std::uint64_t{1} << 3);
    image.put(kSeven + 24, std::uint32_t{7});
    write_string(image, kAsync + 0x300, U"server", 1);
    write_string(image, kAsync + 0x380, U"consumer", 1);
    write_string(image, kAsync + 0x400, U"orphan", 1);
    write_code(image, code_at(0), strings_at(0), U"serve", 1, U"Server.serve", 1, 10);
    write_code(image, code_at(1), strings_at(1), U"handle", 1, U"Server.handle", 1, 20);
    write_code(image, code_at(2), strings_at(2), U"fetch", 1, U"fetch", 1, 30);
    write_code(image, code_at(3), strings_at(3), U"consume", 1, U"consume", 1, 40);
    write_code(image, code_at(4), strings_at(4), U"orphan_main", 1, U"orphan_main", 1, 50);
    // A second thread state after the fixture's one: no Python frame, its own loop.
    image.put(kThread + 8, kThread2);
    image.put(kThread2 + 152, std::uint64_t{0x7f0000bb0000});
    image.put(kThread2 + 160, std::uint64_t{4243});
  }

  static std::uint64_t code_at(int i) { return kAsyncCode + 0x400 * i; }
  static std::uint64_t strings_at(int i) { return kAsyncCode + 0x4000 + 0x400 * i; }

  void write_type(TypeIndex t, const char* name) {
    image.put(type_at(t) + 24, type_at(t) + 0x180);  // tp_name; tp_base (at 256) stays NULL
    image.put_bytes(type_at(t) + 0x180, name, std::strlen(name) + 1);
  }

  // A coroutine whose embedded frame runs code i at `unit`, in frame state `state`, with
  // `stack` as its localsplus (3.14: stackpointer just past it; tagged references as given).
  void write_coroutine(int i, std::int8_t state, int unit,
                       const std::vector<std::uint64_t>& stack) {
    const std::uint64_t coro = coro_at(i), frame = coro + 72;
    image.put(coro + 8, type_at(kCoroutine));
    image.put(coro + 67, state);                           // gi_frame_state
    image.put(frame + 0, code_at(i) | 1);                  // f_executable, a tagged reference
    image.put(frame + 56, code_at(i) + 208 + 2 * unit);    // instr_ptr
    image.put(frame + 64, frame + 80 + 8 * stack.size());  // stackpointer
    image.put(frame + 74, std::uint8_t{1});                // FRAME_OWNED_BY_GENERATOR
    for (std::size_t k = 0; k < stack.size(); ++k) image.put(frame + 80 + 8 * k, stack[k]);
  }

  void write_task(const Offsets& o, std::uint64_t task, std::uint64_t loop, std::uint64_t name,
                  std::uint64_t coro, std::uint64_t waiter) {
    image.put(task + 8, type_at(kTask));
    image.put(task + o.awaited_by - 80, loop);
    image.put(task + o.awaited_by + 8, std::int32_t{0});  // STATE_PENDING
    image.put(task + o.is_task, std::uint8_t{1});
    image.put(task + o.coro - 8, waiter);  // task_fut_waiter
    image.put(task + o.coro, coro);
    image.put(task + o.name, name);
  }

  // The circular list whose sentinel is at `head`, through the tasks' nodes in order.
  void link(const Offsets& o, std::uint64_t head, const std::vector<std::uint64_t>& tasks) {
    std::vector<std::uint64_t> nodes{head};
    for (const std::uint64_t task : tasks) nodes.push_back(task + o.node);
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      image.put(nodes[k], nodes[(k + 1) % nodes.size()]);                     // next
      image.put(nodes[k] + 8, nodes[(k + nodes.size() - 1) % nodes.size()]);  // prev
    }
  }

  // Thread 1 runs loop 1: "server" runs now, Task-7 awaits a future through two coroutines.
  // Thread 2 runs loop 2: "consumer" awaits Task-7. The interpreter's list keeps "orphan" of a
  // thread state cleared earlier; its loop 3 runs nowhere and its coroutine has not started.
  void write_tasks(const Offsets& o) {
    write_coroutine(0, 0, 5, {});                    // executing
    write_coroutine(1, -1, 9, {0, coro_at(2) | 1});  // awaits fetch() (tagged)
    write_coroutine(2, -1, 5, {kIter1});             // awaits future 1
    write_coroutine(3, -1, 9, {kHandler | 1});       // awaits Task-7
    write_coroutine(4, -3, 0, {});                   // created
    write_task(o, kServer, kLoop1, kAsync + 0x300, coro_at(0), 0);
    write_task(o, kHandler, kLoop1, kSeven, coro_at(1), kFuture1);
    write_task(o, kConsumer, kLoop2, kAsync + 0x380, coro_at(3), kHandler);
    write_task(o, kOrphan, kLoop3, kAsync + 0x400, coro_at(4), 0);
    image.put(kThread + o.running_loop, kLoop1);
    image.put(kThread + o.running_task, kServer);
    image.put(kThread2 + o.running_loop, kLoop2);
    link(o, kThread + o.tstate_head, {kServer, kHandler});
    link(o, kThread2 + o.tstate_head, {kConsumer});
    link(o, kInterp + o.interp_head, {kOrphan});
  }

  // The image read as the capture reads a process's tasks (PythonSession::read_tasks): the
  // thread states of the stack walk, the table found for _asyncio, then AsyncTaskReader.
  AsyncTasks read_tasks(AsyncioDebugTable table) {
    const Layout layout = read_layout();
    const auto maps = image.maps();
    ObjectReader objects(image, maps, layout);
    std::vector<std::uint64_t> tstates;
    for (const auto& thread : StackReader(objects, kRuntime, {}).read_threads()) {
      tstates.push_back(thread.tstate);
    }
    EXPECT_EQ(tstates, (std::vector<std::uint64_t>{kThread, kThread2}));
    AsyncTasksOptions options;
    options.asyncio_debug = std::move(table);
    auto tasks = AsyncTaskReader(objects, kRuntime, options).read(tstates, kModule);
    EXPECT_TRUE(tasks.has_value());
    return tasks.value_or(AsyncTasks{});
  }
};

void expect_frame(const model::Frame& frame, const std::string& function,
                  const std::string& qualname, int line) {
  EXPECT_EQ(frame.function, function);
  EXPECT_EQ(frame.qualname, qualname);
  EXPECT_EQ(frame.file, "/srv/vllm/modèle.py");
  EXPECT_EQ(frame.line, line);
}

// The tasks of the thread lists (thread 1, then 2), then the interpreter's, every field.
void expect_all_tasks(const AsyncTasks& tasks) {
  ASSERT_EQ(tasks.tasks.size(), 4u);
  const auto& server = tasks.tasks[0];
  EXPECT_EQ(server.address, kServer);
  EXPECT_EQ(server.name, "server");
  EXPECT_EQ(server.loop, kLoop1);
  EXPECT_EQ(server.state, model::AsyncTask::State::kPending);
  EXPECT_TRUE(server.running);
  EXPECT_FALSE(server.eager);
  EXPECT_FALSE(server.awaited_task);
  EXPECT_EQ(server.awaits, "");
  ASSERT_EQ(server.coroutine.size(), 1u);
  expect_frame(server.coroutine[0], "serve", "Server.serve", 12);

  const auto& handler = tasks.tasks[1];
  EXPECT_EQ(handler.address, kHandler);
  EXPECT_EQ(handler.name, "Task-7");  // an int name, as asyncio prints it
  EXPECT_EQ(handler.loop, kLoop1);
  EXPECT_EQ(handler.state, model::AsyncTask::State::kPending);
  EXPECT_FALSE(handler.running);
  EXPECT_FALSE(handler.awaited_task);
  EXPECT_EQ(handler.awaits, "Future");
  ASSERT_EQ(handler.coroutine.size(), 2u);  // innermost first
  expect_frame(handler.coroutine[0], "fetch", "fetch", 32);
  expect_frame(handler.coroutine[1], "handle", "Server.handle", 27);

  const auto& consumer = tasks.tasks[2];
  EXPECT_EQ(consumer.address, kConsumer);
  EXPECT_EQ(consumer.name, "consumer");
  EXPECT_EQ(consumer.loop, kLoop2);
  EXPECT_FALSE(consumer.running);
  EXPECT_EQ(consumer.awaited_task, kHandler);
  EXPECT_EQ(consumer.awaits, "");
  ASSERT_EQ(consumer.coroutine.size(), 1u);
  expect_frame(consumer.coroutine[0], "consume", "consume", 47);

  const auto& orphan = tasks.tasks[3];
  EXPECT_EQ(orphan.address, kOrphan);
  EXPECT_EQ(orphan.name, "orphan");
  EXPECT_EQ(orphan.loop, kLoop3);
  EXPECT_FALSE(orphan.running);
  EXPECT_FALSE(orphan.awaited_task);
  EXPECT_EQ(orphan.awaits, "");
  ASSERT_EQ(orphan.coroutine.size(), 1u);  // created: its def line
  expect_frame(orphan.coroutine[0], "orphan_main", "orphan_main", 50);

  for (const auto& t : tasks.tasks) EXPECT_TRUE(t.notes.empty()) << t.name;
  EXPECT_EQ(tasks.loop_threads,
            (std::map<std::uint64_t, std::uint64_t>{{kLoop1, kThread}, {kLoop2, kThread2}}));
}

TEST_F(Asyncio314Image, TasksOfEveryThreadAndOfTheInterpreterWithTheirChains) {
  const Offsets o;
  write_tasks(o);
  const auto tasks = read_tasks(found(o.table()));
  expect_all_tasks(tasks);
  EXPECT_TRUE(tasks.notes.empty()) << tasks.notes.front();
}

// A build with other offsets (a larger object head, as free-threaded builds have): read
// right only because the offsets come from its table, loop, state and waiter derived from it.
TEST_F(Asyncio314Image, OffsetsComeFromTheTable) {
  const Offsets o = Offsets{}.shifted();
  write_tasks(o);
  const auto tasks = read_tasks(found(o.table()));
  expect_all_tasks(tasks);
  EXPECT_TRUE(tasks.notes.empty()) << tasks.notes.front();
  const auto layout = asyncio_layout_from_debug(read_layout(), o.table());
  EXPECT_EQ(layout.task_loop.offset, 32u);
  EXPECT_EQ(layout.task_state.offset, 120u);
  EXPECT_EQ(layout.task_fut_waiter.offset, 136u);
  EXPECT_EQ(layout.task_node, 168u);
  EXPECT_EQ(layout.tstate_tasks_head, 880u);
  EXPECT_EQ(layout.interp_tasks_head, 7800u);
}

// Without a sound table the built-in 3.14.0 offsets serve, and the dump says why: the threads'
// tasks are read, the interpreter's list (whose offset only the table gives) is not.
TEST_F(Asyncio314Image, AnAbsurdOrMissingTableFallsBackWithANote) {
  const Offsets o;
  write_tasks(o);
  struct Case {
    const char* what;
    AsyncioDebugTable table;
    const char* note;
  };
  Offsets node_far = o, unordered = o, huge = o;
  node_far.node = std::uint64_t{1} << 40;
  unordered.coro = o.awaited_by;  // task_coro cannot precede fut_state
  huge.tstate_size = std::uint64_t{1} << 50;
  AsyncioDebugTable missing;
  missing.problem = "no mapped _asyncio module has an .AsyncioDebug section";
  std::vector<Case> cases = {
      {"node outside TaskObj", found(node_far.table()), ".AsyncioDebug: task_node (1099511627776)"},
      {"fields out of order", found(unordered.table()), "out of TaskObj's order"},
      {"absurd size", found(huge.table()), "implausible size of asyncio_thread_state"},
      {"truncated", found(std::vector<std::byte>(40)), "truncated"},
      {"missing", missing, "no mapped _asyncio module"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    const auto tasks = read_tasks(c.table);
    EXPECT_TRUE(has_note(tasks, c.note)) << (tasks.notes.empty() ? "" : tasks.notes.front());
    EXPECT_TRUE(has_note(tasks, "built-in offsets of CPython 3.14.0"));
    ASSERT_EQ(tasks.tasks.size(), 3u);
    EXPECT_TRUE(task_named(tasks, "server") && task_named(tasks, "server")->running);
    ASSERT_TRUE(task_named(tasks, "consumer"));
    EXPECT_EQ(task_named(tasks, "consumer")->awaited_task, kHandler);
    EXPECT_FALSE(task_named(tasks, "orphan"));
  }
}

// A list that never leads back to its sentinel ends at the first node seen twice, with a note.
TEST_F(Asyncio314Image, ABrokenTaskListIsReadInPartWithANote) {
  const Offsets o;
  write_tasks(o);
  image.put(kHandler + o.node, kServer + o.node);  // Task-7's next: the server again
  const auto tasks = read_tasks(found(o.table()));
  EXPECT_TRUE(has_note(tasks, "task list of a thread state is broken"));
  EXPECT_EQ(tasks.tasks.size(), 4u);
  EXPECT_TRUE(task_named(tasks, "Task-7"));
}

// The section found in a real ELF file loaded by a real process, read from that process's
// memory at its load address: the child changes one value after loading, so a value read
// from the file instead would differ.
TEST(AsyncioDebugSection, FoundInALibraryLoadedIntoAChild) {
  const std::string library = ASYNCIO_DEBUG_FIXTURE;
  testing::TargetProcess child(
      {"/usr/bin/python3", "-c",
       "import ctypes, sys, time\n"
       "table = (ctypes.c_uint64 * 13).in_dll(ctypes.CDLL(sys.argv[1]), '_AsyncioDebug')\n"
       "table[0] = 186\n"
       "print('ready', flush=True)\n"
       "time.sleep(120)\n",
       library});
  child.wait_for_line("ready");
  int error = 0;
  auto maps = proc::read_memory_map(child.pid(), &error);
  ASSERT_TRUE(maps) << error;
  proc::ProcessFs fs(child.pid());
  elf::ProcessImage image(fs, std::move(*maps));
  memory::ProcessMemory memory(child.pid());
  const AsyncioDebugTable table = read_asyncio_debug(image, memory);
  ASSERT_EQ(table.bytes.size(), kAsyncioDebugSize) << table.problem;
  EXPECT_TRUE(table.problem.empty());
  EXPECT_EQ(table.module_path, library);
  const auto* mapping = image.maps().find(table.address);
  ASSERT_NE(mapping, nullptr);
  EXPECT_EQ(mapping->path, library);
  std::uint64_t values[13];
  std::memcpy(values, table.bytes.data(), sizeof values);
  EXPECT_EQ(std::vector<std::uint64_t>(values, values + 13),
            (std::vector<std::uint64_t>{186, 152, 112, 124, 125, 144, 168, 8192, 7800, 896, 864,
                                        872, 880}));
  child.kill_all();

  // A process without _asyncio: nothing found, and why.
  testing::TargetProcess plain(
      {"/usr/bin/python3", "-c", "import time\nprint('ready', flush=True)\ntime.sleep(120)\n"});
  plain.wait_for_line("ready");
  auto plain_maps = proc::read_memory_map(plain.pid(), &error);
  ASSERT_TRUE(plain_maps) << error;
  proc::ProcessFs plain_fs(plain.pid());
  elf::ProcessImage plain_image(plain_fs, std::move(*plain_maps));
  memory::ProcessMemory plain_memory(plain.pid());
  const AsyncioDebugTable none = read_asyncio_debug(plain_image, plain_memory);
  EXPECT_TRUE(none.bytes.empty());
  EXPECT_EQ(none.problem, "no mapped _asyncio module has an .AsyncioDebug section");
}

}  // namespace
}  // namespace hangscope::python

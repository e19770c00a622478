#include "hangscope/report/dump_format.h"

#include <gtest/gtest.h>

#include "hangscope/snapshot/codec.h"

namespace hangscope::report {
namespace {

model::ProcessDump sample_dump() {
  model::ProcessDump dump;
  dump.pid = 123;
  dump.command = "python3";
  dump.notes = {"cannot read /gone.so (deleted)"};
  model::ThreadDump thread;
  thread.tid = 124;
  thread.name = "pt_main_thread";
  thread.state = 'S';
  thread.wchan = "futex_wait_queue";
  model::Frame named;
  named.function = "gloo::barrier(gloo::BarrierOptions&)";
  named.module = "/usr/lib/libgloo.so.0.5.0";
  named.address = 0x7f0000001234;
  named.offset = 0xaa;
  named.module_offset = 0x37000;
  model::Frame unnamed;
  unnamed.module = "/usr/lib/libx.so";
  unnamed.address = 0x7f0000009999;
  unnamed.offset = unnamed.module_offset = 0x9999;
  model::Frame py;
  py.kind = model::Frame::Kind::kPython;
  py.function = "barrier";
  py.qualname = "GroupCoordinator.barrier";
  py.file = "/srv/vllm/distributed/parallel_state.py";
  py.line = 480;
  py.locals = {{"group_name", "'tp:0'"}};
  thread.frames = {named, py, unnamed};
  thread.native_frames = {named, unnamed};
  thread.python_frames = {py};
  thread.py_thread_id = 140000000000;
  thread.py_thread_name = "MainThread";
  thread.holds_gil = true;
  dump.threads.push_back(thread);
  return dump;
}

TEST(DumpJson, UsesTheContractKeys) {
  const auto json = dump_to_json(sample_dump());
  EXPECT_EQ(json["pid"], 123);
  EXPECT_TRUE(json["python"].is_null());
  EXPECT_EQ(json["notes"][0], "cannot read /gone.so (deleted)");
  const auto& thread = json["threads"][0];
  EXPECT_EQ(thread["tid"], 124);
  EXPECT_EQ(thread["name"], "pt_main_thread");
  EXPECT_EQ(thread["state"], "S");
  EXPECT_EQ(thread["py_thread_id"], 140000000000);
  EXPECT_EQ(thread["holds_gil"], true);
  EXPECT_EQ(thread["merge"], "ok");
  const auto& frame = thread["frames"][0];
  EXPECT_EQ(frame["kind"], "native");
  EXPECT_EQ(frame["function"], "gloo::barrier(gloo::BarrierOptions&)");
  EXPECT_EQ(frame["module"], "/usr/lib/libgloo.so.0.5.0");
  EXPECT_EQ(frame["offset"], 0xaa);
  EXPECT_EQ(frame["address"], 0x7f0000001234);
  EXPECT_TRUE(thread["frames"][2]["function"].is_null());
  const auto& py = thread["frames"][1];
  EXPECT_EQ(py["kind"], "python");
  EXPECT_EQ(py["qualname"], "GroupCoordinator.barrier");
  EXPECT_EQ(py["file"], "/srv/vllm/distributed/parallel_state.py");
  EXPECT_EQ(py["line"], 480);
  EXPECT_EQ(py["locals"]["group_name"], "'tp:0'");
  EXPECT_EQ(thread["py_thread_name"], "MainThread");
  EXPECT_EQ(thread["native_frames"].size(), 2u);
  EXPECT_EQ(thread["python_frames"].size(), 1u);
}

TEST(DumpText, ShowsNamedAndUnnamedFrames) {
  const auto text = dump_to_text(sample_dump());
  EXPECT_NE(text.find("Process 123 (python3), 1 thread\n"), std::string::npos) << text;
  EXPECT_NE(text.find("note: cannot read /gone.so (deleted)"), std::string::npos);
  EXPECT_NE(text.find("Thread 124 \"pt_main_thread\" S (sleeping) in futex_wait_queue"),
            std::string::npos);
  EXPECT_NE(text.find("#0  0x00007f0000001234  gloo::barrier(gloo::BarrierOptions&) + 0xaa  "
                      "(/usr/lib/libgloo.so.0.5.0)"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("#1  [py] GroupCoordinator.barrier (/srv/vllm/distributed/parallel_state.py:480)\n"
                "        group_name = 'tp:0'"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("#2  0x00007f0000009999  ??  (/usr/lib/libx.so + 0x9999)"), std::string::npos)
      << text;
}

// A process dump travels in the one wire schema, snapshot.proto (process.proto is gone): the
// frames, their kinds and locals, and the raw stacks come back as they were.
// Tasks print under the thread that runs their loop, innermost coroutine first, naming the task
// they await; a loop no thread runs gets its own heading after the threads.
// A stuck server's request tasks share one chain: the text prints it once under their count
// and first names, largest group first; tasks that differ in anything are printed apart.
TEST(DumpText, TasksWithTheSameChainArePrintedOnceUnderTheirCount) {
  auto dump = sample_dump();
  model::Frame get;
  get.kind = model::Frame::Kind::kPython;
  get.function = "get";
  get.qualname = "RequestOutputCollector.get";
  get.file = "/srv/vllm/v1/engine/output_processor.py";
  get.line = 52;
  std::vector<model::AsyncTask> tasks;
  const auto add = [&](const std::string& name, const std::string& awaits, int line) {
    model::AsyncTask task;
    task.address = 0x7f00001000 + tasks.size() * 0x100;
    task.loop = 0x7f000000a0;
    task.tid = 124;
    task.name = name;
    task.awaits = awaits;
    auto frame = get;
    frame.line = line;
    task.coroutine = std::vector<model::Frame>{frame};
    tasks.push_back(task);
  };
  add("health", "sleep", 52);
  for (int i = 1; i <= 7; ++i) add("request-" + std::to_string(i), "Event.wait", 52);
  add("request-8", "Event.wait", 53);  // another line: its own entry
  dump.tasks = tasks;
  const std::string text = dump_to_text(dump);
  const auto loop = text.find("  asyncio tasks of loop 0x7f000000a0: 9\n");
  ASSERT_NE(loop, std::string::npos) << text;
  const std::string group =
      "    7 tasks (\"request-1\", \"request-2\", \"request-3\", \"request-4\", "
      "\"request-5\" and 2 more) pending, awaits Event.wait\n"
      "      #0  [py] RequestOutputCollector.get (/srv/vllm/v1/engine/output_processor.py:52)\n";
  EXPECT_EQ(text.find(group),
            loop + std::string("  asyncio tasks of loop 0x7f000000a0: 9\n").size())
      << text;
  EXPECT_EQ(text.find("request-6"), std::string::npos) << text;
  EXPECT_NE(text.find("    Task \"health\" pending, awaits sleep\n", loop), std::string::npos)
      << text;
  EXPECT_NE(text.find("    Task \"request-8\" pending, awaits Event.wait\n"
                      "      #0  [py] RequestOutputCollector.get "
                      "(/srv/vllm/v1/engine/output_processor.py:53)\n",
                      loop),
            std::string::npos)
      << text;
  EXPECT_EQ(dump_to_json(dump)["tasks"].size(), 9u);  // JSON keeps every task
}

TEST(DumpText, ShowsAsyncioTasksUnderTheirThread) {
  auto dump = sample_dump();
  model::Frame get;
  get.kind = model::Frame::Kind::kPython;
  get.function = "get";
  get.qualname = "Queue.get";
  get.file = "/usr/lib/python3.11/asyncio/queues.py";
  get.line = 158;
  model::Frame handler = get;
  handler.function = handler.qualname = "generate";
  handler.file = "/srv/vllm/engine/async_llm.py";
  handler.line = 301;
  model::AsyncTask waiting;
  waiting.address = 0x7f00000010;
  waiting.loop = 0x7f000000a0;
  waiting.tid = 124;
  waiting.name = "Task-7";
  waiting.coroutine = std::vector<model::Frame>{get, handler};
  waiting.awaits = "Queue.get";
  model::AsyncTask parent;
  parent.address = 0x7f00000020;
  parent.loop = 0x7f000000a0;
  parent.tid = 124;
  parent.name = "request-1";
  parent.running = true;
  parent.awaited_task = waiting.address;
  model::AsyncTask idle;
  idle.address = 0x7f00000030;
  idle.loop = 0x7f000000b0;
  idle.name = "never-started";
  idle.state = model::AsyncTask::State::kCancelled;
  dump.tasks = {waiting, parent, idle};
  const std::string text = dump_to_text(dump);
  const auto thread = text.find("Thread 124 ");
  const auto loop = text.find("  asyncio tasks of loop 0x7f000000a0: 2\n", thread);
  ASSERT_NE(thread, std::string::npos) << text;
  ASSERT_NE(loop, std::string::npos) << text;
  EXPECT_NE(text.find("    Task \"Task-7\" pending, awaits Queue.get\n"
                      "      #0  [py] Queue.get (/usr/lib/python3.11/asyncio/queues.py:158)\n"
                      "      #1  [py] generate (/srv/vllm/engine/async_llm.py:301)\n",
                      loop),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    Task \"request-1\" pending [running], awaits Task \"Task-7\" "
                      "(0x7f00000010)\n",
                      loop),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nTasks of loop 0x7f000000b0 (no thread runs it): 1\n"
                      "  Task \"never-started\" cancelled\n"),
            std::string::npos)
      << text;
  const auto json = dump_to_json(dump);
  ASSERT_EQ(json["tasks"].size(), 3u);
  EXPECT_EQ(json["tasks"][0]["awaits"], "Queue.get");
  EXPECT_EQ(json["tasks"][0]["coroutine"][0]["qualname"], "Queue.get");
  EXPECT_EQ(json["tasks"][1]["awaited_task"], waiting.address);
  EXPECT_TRUE(json["tasks"][1]["awaits"].is_null());
  EXPECT_TRUE(json["tasks"][2]["tid"].is_null());
  EXPECT_EQ(json["tasks"][2]["state"], "cancelled");
}

TEST(DumpProto, RoundTripsThroughTheSnapshotSchema) {
  model::NodeSnapshot node;
  node.node_name = "node0";
  model::ProcessRecord record;
  record.pid = 123;
  record.dump = sample_dump();
  node.processes.push_back(record);
  const auto back = snapshot::as_transmitted(node);
  ASSERT_EQ(back.processes.size(), 1u);
  ASSERT_TRUE(back.processes[0].dump);
  const auto& dump = *back.processes[0].dump;
  EXPECT_EQ(dump.pid, 123);
  ASSERT_EQ(dump.threads.size(), 1u);
  const auto& t = dump.threads[0];
  EXPECT_EQ(t.frames[0].function, "gloo::barrier(gloo::BarrierOptions&)");
  EXPECT_EQ(t.frames[0].kind, model::Frame::Kind::kNative);
  EXPECT_EQ(t.frames[2].module_offset, 0x9999u);
  EXPECT_EQ(t.frames[1].kind, model::Frame::Kind::kPython);
  EXPECT_EQ(t.frames[1].locals.at(0).second, "'tp:0'");
  EXPECT_EQ(t.py_thread_name, "MainThread");
  EXPECT_EQ(t.python_frames.size(), 1u);
  EXPECT_EQ(t.native_frames.size(), 2u);
}

}  // namespace
}  // namespace hangscope::report

// Rank identity of real processes: a process retitled with setproctitle (as vLLM and Ray do)
// whose /proc environ reads empty still yields its environment from memory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "hangscope/capture/node_capture.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/identity/environment.h"
#include "hangscope/identity/rank_identity.h"
#include "hangscope/memory/process_memory.h"
#include "target_process.h"

namespace hangscope {
namespace {

identity::Environment environment_of(pid_t pid) {
  proc::ProcessFs fs(pid);
  int error = 0;
  elf::ProcessImage image(fs, *proc::read_memory_map(pid, &error));
  memory::ProcessMemory memory(pid);
  return identity::read_environment(fs, image, memory);
}

TEST(IdentityCapture, SetproctitleRankIsIdentifiedFromItsEnvironmentInMemory) {
  testing::TargetProcess rank({"/usr/bin/python3", "-c",
                               "import setproctitle, time, os\n"
                               "setproctitle.setproctitle('VLLM::Worker_PP1_TP3')\n"
                               "os.write(1, b'ready\\n')\n"
                               "time.sleep(600)\n"},
                              {{"RANK", "7"},
                               {"LOCAL_RANK", "3"},
                               {"WORLD_SIZE", "8"},
                               {"MASTER_ADDR", "10.9.0.1"},
                               {"MASTER_PORT", "29501"}});
  rank.wait_for_line("ready");
  proc::ProcessFs fs(rank.pid());
  const auto environ_file = read_file(fs.dir() + "/environ");
  ASSERT_TRUE(environ_file.text);
  // What makes this hard: /proc shows no variables any more.
  EXPECT_TRUE(identity::parse_environ_block(*environ_file.text).empty());
  const auto cmdline = read_file(fs.dir() + "/cmdline");
  ASSERT_TRUE(cmdline.text);
  EXPECT_EQ(cmdline.text->rfind("VLLM::Worker_PP1_TP3", 0), 0u);

  const auto env = environment_of(rank.pid());
  EXPECT_EQ(env.source, identity::EnvironmentSource::kMemory);
  EXPECT_EQ(env.variables.at("RANK"), "7");
  const auto id = identity::identify(
      env.variables, env.source == identity::EnvironmentSource::kMemory, "VLLM::Worker_PP1_TP3");
  EXPECT_EQ(model::to_string(id.role), "rank");
  EXPECT_EQ(id.rank, 7);
  EXPECT_EQ(id.local_rank, 3);
  EXPECT_EQ(id.world_size, 8);
  EXPECT_EQ(id.tp, 3);
  EXPECT_EQ(id.pp, 1);
  EXPECT_EQ(id.source, model::IdentitySource::kMemoryEnv);
  EXPECT_EQ(id.job, "10.9.0.1:29501");
}

// --select on a retitled process: its title, and its executable (which setproctitle leaves
// alone) both select it; a pattern matching neither leaves it out.
TEST(IdentityCapture, SelectFindsARetitledProcessByTitleOrExecutable) {
  testing::TargetProcess rank({"/usr/bin/python3", "-c",
                               "import setproctitle, time, os\n"
                               "setproctitle.setproctitle('VLLM::Worker_TP1')\n"
                               "os.write(1, b'ready\\n')\n"
                               "time.sleep(600)\n"});
  rank.wait_for_line("ready");
  const auto captured = [&](const std::string& select) {
    capture::NodeCaptureOptions options;
    options.selection.pids = {rank.pid()};
    options.selection.select = select;
    options.process.stacks = capture::StackKinds::kPythonOnly;
    return capture::capture_node(options).processes.size();
  };
  EXPECT_EQ(captured("Worker_TP1$"), 1u);
  EXPECT_EQ(captured("/python3[.0-9]*$"), 1u);  // /proc/PID/cmdline no longer says python
  EXPECT_EQ(captured("^python3 -c"), 0u);
  EXPECT_EQ(captured("sglang"), 0u);
  EXPECT_THROW(captured("(unclosed"), Error);
}

// A plain process's environment is read from libc's environ too: the same variables /proc shows.
TEST(IdentityCapture, PlainProcessEnvironmentComesFromMemory) {
  testing::TargetProcess target({NATIVE_TARGET}, {{"RANK", "2"}});
  target.wait_for_line("ready");
  const auto env = environment_of(target.pid());
  EXPECT_EQ(env.source, identity::EnvironmentSource::kMemory);
  EXPECT_EQ(env.variables.at("RANK"), "2");
  const auto proc_file = read_file(proc::ProcessFs(target.pid()).dir() + "/environ");
  ASSERT_TRUE(proc_file.text);
  EXPECT_EQ(env.variables, identity::parse_environ_block(*proc_file.text));
}

// Two jobs launched with one MASTER_PORT whose launcher scripts each set their own through
// os.environ before the ranks start (issue 30): /proc/PID/environ still shows the port they were
// started with, the live environment the one they use; each rank is in its own job, never one
// world.
TEST(IdentityCapture, MasterPortSetThroughOsEnvironSeparatesTheJobs) {
  const std::map<std::string, std::string> launched = {
      {"RANK", "0"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  const std::string fixture = HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/hostile_names.py";
  testing::TargetProcess first({"/usr/bin/python3", fixture, "29601"}, launched);
  testing::TargetProcess second({"/usr/bin/python3", fixture, "29602"}, launched);
  first.wait_for_line("ready");
  second.wait_for_line("ready");
  const auto proc_file = read_file(proc::ProcessFs(first.pid()).dir() + "/environ");
  ASSERT_TRUE(proc_file.text);
  EXPECT_EQ(identity::parse_environ_block(*proc_file.text).at("MASTER_PORT"), "29500");
  const auto env = environment_of(first.pid());
  EXPECT_EQ(env.source, identity::EnvironmentSource::kMemory);
  EXPECT_EQ(env.variables.at("MASTER_PORT"), "29601");

  capture::NodeCaptureOptions options;
  options.selection.pids = {first.pid(), second.pid()};
  options.process.stacks = capture::StackKinds::kPythonOnly;
  const auto node = capture::capture_node(options);
  ASSERT_EQ(node.processes.size(), 2u);
  std::map<pid_t, std::string> jobs;
  for (const auto& p : node.processes) {
    EXPECT_EQ(p.environment_source, "memory");
    EXPECT_EQ(model::to_string(p.identity.role), "rank");
    jobs[p.pid] = p.identity.job;
  }
  EXPECT_EQ(jobs[first.pid()], "127.0.0.1:29601");
  EXPECT_EQ(jobs[second.pid()], "127.0.0.1:29602");
}

}  // namespace
}  // namespace hangscope

namespace hangscope {
namespace {

// A Ray worker's log lives in Ray's session directory, named after its pid; its vLLM worker
// line names the rank of a process whose environment says nothing.
TEST(IdentityCapture, RayWorkerLogIsFoundAndNamesTheRank) {
  testing::TargetProcess worker({"/usr/bin/python3", "-c",
                                 "import setproctitle, time, os\n"
                                 "setproctitle.setproctitle('ray::RayWorkerWrapper')\n"
                                 "os.write(1, b'ready\\n')\n"
                                 "time.sleep(600)\n"});
  worker.wait_for_line("ready");
  const std::string session = "/tmp/ray/session_hangscope_test_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + session + "/logs").c_str()), 0);
  {
    std::ofstream log(session + "/logs/worker-0123abcd-" + std::to_string(worker.pid()) + ".out");
    log << "(RayWorkerWrapper pid=" << worker.pid()
        << ") INFO world_size=8 rank=6 local_rank=2 backend=nccl\n";
  }
  capture::NodeCaptureOptions options;
  options.selection.pids = {worker.pid()};
  const auto node = capture::capture_node(options);
  std::system(("rm -rf " + session).c_str());
  ASSERT_EQ(node.processes.size(), 1u);
  const auto& record = node.processes[0];
  EXPECT_EQ(model::to_string(record.identity.role), "rank");
  EXPECT_EQ(record.identity.rank, 6);
  EXPECT_EQ(record.identity.world_size, 8);
  EXPECT_EQ(record.identity.source, model::IdentitySource::kLog);
  ASSERT_FALSE(record.logs.empty());
  EXPECT_NE(record.logs[0].path.find(session), std::string::npos);
}

}  // namespace
}  // namespace hangscope

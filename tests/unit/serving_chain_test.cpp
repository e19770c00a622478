// The serving chain on hand-built snapshots: an API server with asyncio request tasks, a vLLM V1
// engine core whose busy loop waits in the shared-memory broadcast ring, and the workers' job.
// The front-end verdict names the stuck worker first; healthy servers get none.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis_builders.h"
#include "hangscope/analysis/analysis.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/report/report.h"
#include "hangscope/rules/rule.h"
#include "hangscope/waits/serving_roles.h"

namespace hangscope::analysis {
namespace {

using namespace testing_builders;

const std::string kSite = "/opt/venv/lib/python3.12/site-packages/";
const std::string kShm = kSite + "vllm/distributed/device_communicators/shm_broadcast.py";
const std::string kExecutor = kSite + "vllm/v1/executor/multiproc_executor.py";
const std::string kCore = kSite + "vllm/v1/engine/core.py";
const std::string kAsyncLlm = kSite + "vllm/v1/engine/async_llm.py";
const std::string kOutputProcessor = kSite + "vllm/v1/engine/output_processor.py";
const std::string kCoreClient = kSite + "vllm/v1/engine/core_client.py";
const std::string kServingChat = kSite + "vllm/entrypoints/openai/serving_chat.py";
const std::string kApiServer = kSite + "vllm/entrypoints/openai/api_server.py";
const std::string kParallelState = kSite + "vllm/distributed/parallel_state.py";
const std::string kGpuWorker = kSite + "vllm/v1/worker/gpu_worker.py";
const std::string kModelRunner = kSite + "vllm/v1/worker/gpu_model_runner.py";
const std::string kThreading = "/usr/lib/python3.12/threading.py";
const std::string kQueue = "/usr/lib/python3.12/queue.py";
const std::string kAsyncioQueues = "/usr/lib/python3.12/asyncio/queues.py";
const std::string kAsyncioLocks = "/usr/lib/python3.12/asyncio/locks.py";
const std::string kSelectors = "/usr/lib/python3.12/selectors.py";
const std::string kBaseEvents = "/usr/lib/python3.12/asyncio/base_events.py";
const std::string kTokenizerManager = kSite + "sglang/srt/managers/tokenizer_manager.py";
const std::string kSglangHttpServer = kSite + "sglang/srt/entrypoints/http_server.py";
const std::string kSglangLaunchServer = kSite + "sglang/launch_server.py";

constexpr pid_t kApiPid = 800;
constexpr pid_t kEnginePid = 900;

// The worker's own loop: WorkerProc.worker_busy_loop → Worker.execute_model → …
// The analysis of `bundle` as a capture would have given it: every sample's processes carry
// the serving roles capture decides (waits/serving_roles.h), which the analysis only reads.
analysis::Analysis diagnose_captured(model::Bundle& bundle, const rules::RuleSet& rules = {}) {
  for (auto& sample : bundle.snapshots) waits::assign_serving_roles(sample.processes);
  return diagnosis::diagnose(bundle, rules);
}

std::vector<model::Frame> worker_outer() {
  return {method("Worker.execute_model", kGpuWorker, 380),
          method("WorkerProc.worker_busy_loop", kExecutor, 593),
          method("WorkerProc.worker_main", kExecutor, 520)};
}

std::vector<model::Frame> worker_in_all_reduce() {
  std::vector<model::Frame> frames = {
      native("__futex_abstimed_wait_common"), native("c10d::ProcessGroupGloo::AsyncWork::wait"),
      py("all_reduce", kC10d, 1536), method("GroupCoordinator.all_reduce", kParallelState, 330)};
  for (auto& f : worker_outer()) frames.push_back(f);
  return frames;
}

std::vector<model::Frame> worker_stuck_in_runner() {
  std::vector<model::Frame> frames = {native("__futex_abstimed_wait_common"), native("take_gil"),
                                      method("Event.wait", kThreading, 629),
                                      method("GPUModelRunner.execute_model", kModelRunner, 1460)};
  for (auto& f : worker_outer()) frames.push_back(f);
  return frames;
}

std::vector<model::Frame> worker_idle_in_ring() {
  return {native("clock_nanosleep"), method("MessageQueue.acquire_read", kShm, 440),
          method("MessageQueue.dequeue", kShm, 512),
          method("WorkerProc.worker_busy_loop", kExecutor, 590),
          method("WorkerProc.worker_main", kExecutor, 520)};
}

std::vector<model::Frame> worker_computing() {
  std::vector<model::Frame> frames = {
      method("LlamaModel.forward", kSite + "vllm/model_executor/models/llama.py", 360),
      method("GPUModelRunner.execute_model", kModelRunner, 1400)};
  for (auto& f : worker_outer()) frames.push_back(f);
  return frames;
}

// The engine core's busy loop inside a step, waiting for worker 0's response.
std::vector<model::Frame> engine_blocked(bool with_locals = true) {
  std::vector<std::pair<std::string, std::string>> w;
  if (with_locals) {
    w = {{"w",
          "WorkerProcHandle(proc=<SpawnProcess name='VllmWorker-0' pid=1000 parent=900 started "
          "daemon>, rank=0, worker_response_mq=<vllm.distributed.device_communicators."
          "shm_broadcast.MessageQueue object at 0x7f3a>, death_writer=None)"},
         {"dequeue_timeout", "None"}};
  }
  return {native("clock_nanosleep"),
          method("MessageQueue.acquire_read", kShm, 440),
          method("MessageQueue.dequeue", kShm, 512),
          method("MultiprocExecutor.collective_rpc.<locals>.get_response", kExecutor, 243, w),
          method("MultiprocExecutor.collective_rpc", kExecutor, 262),
          method("MultiprocExecutor.execute_model", kExecutor, 172),
          method("EngineCore.step", kCore, 284),
          method("EngineCoreProc._process_engine_step", kCore, 754),
          method("EngineCoreProc.run_busy_loop", kCore, 727),
          method("EngineCoreProc.run_engine_core", kCore, 700)};
}

std::vector<model::Frame> engine_idle() {
  return {native("__futex_abstimed_wait_common"),
          method("Condition.wait", kThreading, 327),
          method("Queue.get", kQueue, 171),
          method("EngineCoreProc._process_input_queue", kCore, 740),
          method("EngineCoreProc.run_busy_loop", kCore, 726),
          method("EngineCoreProc.run_engine_core", kCore, 700)};
}

std::vector<model::Frame> engine_scheduling() {
  return {method("Scheduler.schedule", kSite + "vllm/v1/core/sched/scheduler.py", 210),
          method("EngineCore.step", kCore, 280),
          method("EngineCoreProc._process_engine_step", kCore, 754),
          method("EngineCoreProc.run_busy_loop", kCore, 727),
          method("EngineCoreProc.run_engine_core", kCore, 700)};
}

std::vector<model::Frame> event_loop_idle(const std::string& main_file) {
  return {native("epoll_wait"),
          method("EpollSelector.select", kSelectors, 468),
          method("BaseEventLoop._run_once", kBaseEvents, 1949),
          method("BaseEventLoop.run_forever", kBaseEvents, 641),
          method("BaseEventLoop.run_until_complete", kBaseEvents, 674),
          py("<module>", main_file, 1900)};
}

model::AsyncTask task(std::uint64_t address, std::string name, std::vector<model::Frame> chain,
                      std::string awaits = "") {
  model::AsyncTask t;
  t.address = address;
  t.loop = 0x7f0000001000;
  t.tid = kApiPid;
  t.name = std::move(name);
  t.coroutine = std::move(chain);
  t.awaits = std::move(awaits);
  return t;
}

model::AsyncTask request_task(std::uint64_t address, int n) {
  return task(address, "Task-" + std::to_string(n),
              {method("Event.wait", kAsyncioLocks, 212),
               method("RequestOutputCollector.get", kOutputProcessor, 55),
               method("AsyncLLM.generate", kAsyncLlm, 330),
               method("OpenAIServingChat.chat_completion_full_generator", kServingChat, 1190),
               method("OpenAIServingChat.create_chat_completion", kServingChat, 290),
               py("create_chat_completion", kApiServer, 640)},
              "Event.wait");
}

model::AsyncTask output_handler_task() {
  return task(0x7f00000a0000, "Task-2",
              {method("Queue.get", kAsyncioQueues, 158),
               method("AsyncMPClient.get_output_async", kCoreClient, 840),
               method("AsyncLLM._run_output_handler.<locals>.output_handler", kAsyncLlm, 460)},
              "Future");
}

model::AsyncTask server_task() {
  return task(0x7f00000b0000, "Task-1", {method("Server.serve", kSite + "uvicorn/server.py", 70)},
              "Future");
}

struct Front {
  std::function<std::vector<model::Frame>(int sample)> engine;  // null: no engine core
  char engine_state = 'S';
  std::uint64_t engine_cpu_per_sample = 0;
  // The API server's tasks per sample (null: no API server; empty: tasks not read).
  std::function<std::vector<model::AsyncTask>(int sample)> tasks;
  std::string api_cmdline = "/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model m";
  std::string api_main = kApiServer;
  std::vector<model::Frame> api_frames;  // empty: an idle event loop under api_main
};

model::ProcessRecord front_process(pid_t pid, pid_t ppid, std::string title, std::string cmdline,
                                   std::vector<model::Frame> frames, char state,
                                   std::uint64_t utime) {
  model::ProcessRecord p;
  p.pid = pid;
  p.ppid = ppid;
  p.comm = "python3";
  p.cmdline = std::move(cmdline);
  p.state = state;
  p.start_time_ticks = 400;
  p.utime_ticks = utime;
  p.identity.title = title;
  // The capture calls a parent of ranks with no rank of its own a launcher (title kept).
  p.identity.role = model::ProcessRole::kLauncher;
  model::ProcessDump dump;
  dump.pid = pid;
  dump.python = "3.12.1";
  dump.threads.push_back(thread(pid, state, std::move(frames)));
  p.dump = std::move(dump);
  return p;
}

// The front processes added to node0 in every sample of `bundle`.
void add_front(model::Bundle& bundle, const Front& front) {
  for (auto& s : bundle.snapshots) {
    if (s.node_name != "node0") continue;
    const int sample = s.sample_index;
    if (front.tasks) {
      auto api = front_process(
          kApiPid, 1, "", front.api_cmdline,
          front.api_frames.empty() ? event_loop_idle(front.api_main) : front.api_frames, 'S', 500);
      api.identity.role = model::ProcessRole::kUnidentified;
      api.dump->tasks = front.tasks(sample);
      s.processes.push_back(std::move(api));
    }
    if (front.engine) {
      s.processes.push_back(
          front_process(kEnginePid, kApiPid, "VLLM::EngineCore", "VLLM::EngineCore",
                        front.engine(sample), front.engine_state,
                        300 + front.engine_cpu_per_sample * static_cast<std::uint64_t>(sample)));
    }
  }
}

std::vector<model::AsyncTask> stuck_requests(int count) {
  std::vector<model::AsyncTask> tasks = {server_task(), output_handler_task()};
  for (int i = 0; i < count; ++i) {
    tasks.push_back(request_task(0x7f0000c00000 + 0x1000 * static_cast<std::uint64_t>(i), i + 3));
  }
  return tasks;
}

model::DistributedState world(int rank, int size) {
  model::DistributedState d;
  d.rank = rank;
  d.world_size = size;
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(r);
  d.groups.push_back(pg("0", ranks, rank));
  return d;
}

// Four TP workers under the engine core: ranks 0-2 in the TP all_reduce, rank 3 stuck before it.
JobBuilder stuck_workers() {
  JobBuilder b(4, "127.0.0.1:40123");
  b.parent(kEnginePid);
  for (int r = 0; r < 3; ++r) b.rank(r, worker_in_all_reduce(), 'S', 0, 4);
  b.rank(3, worker_stuck_in_runner(), 'S', 0, 4);
  for (int r = 0; r < 4; ++r) b.distributed(r, world(r, 4));
  return b;
}

TEST(ServingChain, TheTopVerdictNamesTheStuckWorkerBehindTheApiServersRequests) {
  auto bundle = stuck_workers().bundle();
  Front front;
  front.engine = [](int) { return engine_blocked(); };
  front.tasks = [](int) { return stuck_requests(37); };
  add_front(bundle, front);
  const auto a = diagnose_captured(bundle);

  ASSERT_FALSE(a.verdicts.empty());
  const auto& top = a.verdicts.front();
  EXPECT_EQ(top.id, "serving-stalled");
  EXPECT_EQ(top.diverged_ranks, std::vector<int>{3});
  EXPECT_EQ(top.job, "127.0.0.1:40123");
  // Root first, with its frame; then the chain from the front.
  EXPECT_EQ(top.summary.rfind("Worker rank 3 (node0 pid 1003) is stuck in Event.wait "
                              "(python3.12/threading.py:629) <- GPUModelRunner.execute_model "
                              "(vllm/v1/worker/gpu_model_runner.py:"
                              "1460)",
                              0),
            0u)
      << top.summary;
  EXPECT_NE(
      top.summary.find("the API server (node0 pid 800) has 37 request tasks awaiting the "
                       "engine core's output, and the engine core (node0 pid 900) waits in the "
                       "shm broadcast ring (MessageQueue.acquire_read (vllm/distributed/"
                       "device_communicators/shm_broadcast.py:440)) for worker rank 0, "
                       "which waits for rank 3 in all_reduce"),
      std::string::npos)
      << top.summary;
  // The rank's own verdict stays, after it.
  ASSERT_GE(a.verdicts.size(), 2u);
  EXPECT_EQ(a.verdicts[1].diverged_ranks, std::vector<int>{3});
  EXPECT_NE(a.verdicts[1].id, "serving-stalled");
  EXPECT_EQ(top.confidence, a.verdicts[1].confidence);

  ASSERT_EQ(a.serving.size(), 1u);
  const auto& chain = a.serving.front();
  EXPECT_EQ(chain.framework, "vllm");
  EXPECT_EQ(chain.job, "127.0.0.1:40123");
  EXPECT_EQ(chain.job_link, "the engine core's child processes");
  EXPECT_EQ(chain.awaited, std::vector<int>{0});
  EXPECT_EQ(chain.awaited_reason, "the worker handle `w` of get_response");
  EXPECT_EQ(chain.roots, std::vector<int>{3});
  ASSERT_EQ(chain.api_servers.size(), 1u);
  EXPECT_EQ(chain.api_servers[0].tasks, 39u);
  EXPECT_EQ(chain.api_servers[0].pending_requests, 37u);
  EXPECT_EQ(chain.api_servers[0].stuck_requests, 37u);
  EXPECT_EQ(chain.api_servers[0].output_handlers, 1u);
  ASSERT_EQ(chain.engines.size(), 1u);
  EXPECT_EQ(chain.engines[0].activity, "blocked");
  EXPECT_EQ(chain.engines[0].progressing, std::optional<bool>(false));
  ASSERT_EQ(chain.links.size(), 4u);
  EXPECT_NE(
      chain.links[0].find("API server (node0 pid 800): 39 asyncio tasks, 37 request tasks "
                          "awaiting the engine's output (37 pending in every sample) in "
                          "RequestOutputCollector.get (vllm/v1/engine/output_processor.py:55) "
                          "<- AsyncLLM.generate (vllm/v1/engine/async_llm.py:330), awaiting "
                          "Event.wait; "),
      std::string::npos)
      << chain.links[0];
  EXPECT_NE(chain.links[1].find("engine core (node0 pid 900, VLLM::EngineCore): blocked, a step in "
                                "flight: waits in "),
            std::string::npos)
      << chain.links[1];
  EXPECT_NE(chain.links[1].find("for worker rank 0 (the worker handle `w` of get_response)"),
            std::string::npos)
      << chain.links[1];
  EXPECT_NE(
      chain.links[2].find("worker rank 0 (job 127.0.0.1:40123) waits for rank 3 in all_reduce"),
      std::string::npos)
      << chain.links[2];
  EXPECT_NE(chain.links[3].find("worker rank 3 (node0 pid 1003): waiting, is stuck in Event.wait"),
            std::string::npos)
      << chain.links[3];

  // report.md: the first line names the worker; the chain is the next section.
  const auto md = report::report_markdown(bundle, a);
  EXPECT_EQ(md.rfind("# hangscope: Worker rank 3 (node0 pid 1003) is stuck in Event.wait", 0), 0u);
  EXPECT_NE(md.find("**Verdict `serving-stalled`**"), std::string::npos);
  const auto chain_at = md.find("## Serving chain");
  ASSERT_NE(chain_at, std::string::npos);
  EXPECT_LT(chain_at, md.find("## Ranks of job"));
  EXPECT_NE(md.find("  1. API server (node0 pid 800)"), std::string::npos);
  const auto json = report::report_json(bundle, a);
  ASSERT_EQ(json["serving"].size(), 1u);
  EXPECT_EQ(json["serving"][0]["roots"], nlohmann::json::array({3}));
  EXPECT_EQ(json["serving"][0]["awaited_workers"], nlohmann::json::array({0}));
  EXPECT_EQ(json["serving"][0]["api_servers"][0]["stuck_requests"], 37);
  EXPECT_EQ(json["serving"][0]["engines"][0]["activity"], "blocked");
  EXPECT_EQ(json["verdicts"][0]["id"], "serving-stalled");
  // The processes that are no rank say what they are in the chain (the engine core, the parent
  // of the ranks, is the engine core, not their launcher: its role is decided at capture).
  std::map<int, nlohmann::json> roles;
  for (const auto& p : json["processes"]) roles[p["pid"].get<int>()] = p["serving_role"];
  EXPECT_EQ(roles[kApiPid], "api");
  EXPECT_EQ(roles[kEnginePid], "engine");
  EXPECT_NE(md.find("| engine | node0 | 900 |"), std::string::npos);
  std::map<int, nlohmann::json> decided;
  for (const auto& p : json["processes"]) decided[p["pid"].get<int>()] = p["role"];
  EXPECT_EQ(decided[kApiPid], "api");
  EXPECT_EQ(decided[kEnginePid], "engine");
}

// Before the task reader (or a capture without tasks): the engine core's stack alone shows a
// step in flight, and the chain from it still names the stuck worker.
TEST(ServingChain, WithoutTasksTheEngineCoresStackStillLeadsToTheWorker) {
  auto bundle = stuck_workers().bundle();
  Front front;
  front.engine = [](int) { return engine_blocked(); };
  front.tasks = [](int) { return std::vector<model::AsyncTask>{}; };
  add_front(bundle, front);
  const auto a = diagnose_captured(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  const auto& top = a.verdicts.front();
  EXPECT_EQ(top.id, "serving-stalled");
  EXPECT_EQ(top.diverged_ranks, std::vector<int>{3});
  EXPECT_EQ(top.summary.rfind("Worker rank 3 (node0 pid 1003) is stuck in Event.wait", 0), 0u);
  EXPECT_NE(top.summary.find(": the engine core (node0 pid 900) waits in the shm broadcast ring"),
            std::string::npos)
      << top.summary;
  EXPECT_EQ(top.summary.find("request tasks"), std::string::npos) << top.summary;
  ASSERT_EQ(a.serving.size(), 1u);
  EXPECT_NE(a.serving[0].links[0].find("its asyncio tasks were not read"), std::string::npos);
}

// Without locals the engine's awaited worker is unknown: every worker, and the chain still ends
// at the rank the graph names.
TEST(ServingChain, WithoutLocalsTheEngineWaitsForItsWorkers) {
  auto bundle = stuck_workers().bundle();
  Front front;
  front.engine = [](int) { return engine_blocked(false); };
  front.tasks = [](int) { return stuck_requests(5); };
  add_front(bundle, front);
  const auto a = diagnose_captured(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_EQ(a.verdicts.front().id, "serving-stalled");
  EXPECT_EQ(a.verdicts.front().diverged_ranks, std::vector<int>{3});
  EXPECT_NE(a.verdicts.front().summary.find("for its workers (job 127.0.0.1:40123)"),
            std::string::npos)
      << a.verdicts.front().summary;
}

// A server with no request in flight: its workers idle in the broadcast ring, the engine core's
// busy loop in `engine`, the API server's tasks its own only.
model::Bundle server_without_requests(std::vector<model::Frame> (*engine)()) {
  JobBuilder b(4, "127.0.0.1:40123");
  b.parent(kEnginePid);
  for (int r = 0; r < 4; ++r)
    b.rank(r, worker_idle_in_ring(), 'S', 0, 4).distributed(r, world(r, 4));
  auto bundle = b.bundle();
  Front front;
  front.engine = [engine](int) { return engine(); };
  front.tasks = [](int) {
    return std::vector<model::AsyncTask>{server_task(), output_handler_task()};
  };
  add_front(bundle, front);
  return bundle;
}

TEST(ServingChain, AnIdleHealthyServerHasNoVerdict) {
  auto bundle = server_without_requests(engine_idle);
  const auto a = diagnose_captured(bundle);
  EXPECT_TRUE(a.verdicts.empty()) << a.verdicts.front().id << ": " << a.verdicts.front().summary;
  ASSERT_EQ(a.serving.size(), 1u);
  EXPECT_EQ(a.serving[0].engines[0].activity, "idle");
  EXPECT_EQ(a.serving[0].api_servers[0].pending_requests, 0u);
  EXPECT_NE(a.conclusion.find("Serving chain: the API server (node0 pid 800) has no request in "
                              "flight; the engine core (node0 pid 900) is idle."),
            std::string::npos)
      << a.conclusion;
}

// A DP engine core between steps (vLLM's DPEngineCoreProc): its busy loop asks the DP group
// whether any engine still has requests, an all_reduce on the DP group. It waits for its peers,
// not for input: blocked, never "idle: waits for input in all_reduce".
std::vector<model::Frame> engine_in_dp_all_reduce() {
  return {native("__futex_abstimed_wait_common"),
          native("c10d::ProcessGroupGloo::AsyncWork::wait"),
          py("all_reduce", kC10d, 1536),
          method("ParallelConfig.has_unfinished_dp", kSite + "vllm/config/parallel.py", 402),
          method("DPEngineCoreProc._has_global_unfinished_reqs", kCore, 1192),
          method("DPEngineCoreProc.run_busy_loop", kCore, 1160),
          method("EngineCoreProc.run_engine_core", kCore, 700)};
}

TEST(ServingChain, ADpEngineCoreInItsDpAllReduceIsBlockedNotIdle) {
  auto bundle = server_without_requests(engine_in_dp_all_reduce);
  const auto a = diagnose_captured(bundle);
  ASSERT_EQ(a.serving.size(), 1u);
  EXPECT_EQ(a.serving[0].engines[0].activity, "blocked");
  EXPECT_EQ(a.conclusion.find("waits for input"), std::string::npos) << a.conclusion;
  EXPECT_EQ(a.conclusion.find("is idle"), std::string::npos) << a.conclusion;
}

// Requests in flight for the whole capture, but the engine core steps (its stack moves, CPU
// grows) and the workers compute: a busy server, not a stuck one.
TEST(ServingChain, PendingRequestsWhileTheEngineMakesProgressIsNoVerdict) {
  JobBuilder b(4, "127.0.0.1:40123");
  b.parent(kEnginePid);
  for (int r = 0; r < 4; ++r) b.rank(r, worker_computing(), 'R', 30, 4).distributed(r, world(r, 4));
  auto bundle = b.bundle();
  Front front;
  front.engine = [](int sample) { return sample % 2 ? engine_scheduling() : engine_blocked(); };
  front.engine_state = 'R';
  front.engine_cpu_per_sample = 40;
  front.tasks = [](int) { return stuck_requests(12); };
  add_front(bundle, front);
  const auto a = diagnose_captured(bundle);
  EXPECT_TRUE(a.verdicts.empty()) << a.verdicts.front().id << ": " << a.verdicts.front().summary;
  ASSERT_EQ(a.serving.size(), 1u);
  EXPECT_EQ(a.serving[0].engines[0].progressing, std::optional<bool>(true));
  EXPECT_EQ(a.serving[0].api_servers[0].stuck_requests, 12u);
  EXPECT_NE(a.conclusion.find("Serving chain: the API server (node0 pid 800) has 12 requests in "
                              "flight; the engine core (node0 pid 900) is "),
            std::string::npos)
      << a.conclusion;
  EXPECT_NE(a.conclusion.find(" and progresses (CPU "), std::string::npos) << a.conclusion;
}

// Requests that complete between samples (new tasks each time) are no stuck requests: the
// worker's own verdict stands alone.
TEST(ServingChain, RequestsThatCompleteDoNotMakeAFrontEndVerdict) {
  auto bundle = stuck_workers().bundle();
  Front front;
  front.engine = [](int) { return engine_blocked(); };
  front.tasks = [](int sample) {
    return std::vector<model::AsyncTask>{
        server_task(), output_handler_task(),
        request_task(0x7f0000d00000 + 0x1000 * static_cast<std::uint64_t>(sample), 10 + sample)};
  };
  add_front(bundle, front);
  const auto a = diagnose_captured(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_NE(a.verdicts.front().id, "serving-stalled");
  EXPECT_EQ(a.verdicts.front().diverged_ranks, std::vector<int>{3});
  EXPECT_EQ(a.serving.at(0).api_servers.at(0).pending_requests, 1u);
  EXPECT_EQ(a.serving.at(0).api_servers.at(0).stuck_requests, 0u);
}

TEST(ServingChain, PendingRequestsWhileTheEngineCoreIdlesAreNamed) {
  JobBuilder b(2, "127.0.0.1:40123");
  b.parent(kEnginePid);
  for (int r = 0; r < 2; ++r)
    b.rank(r, worker_idle_in_ring(), 'S', 0, 4).distributed(r, world(r, 2));
  auto bundle = b.bundle();
  Front front;
  front.engine = [](int) { return engine_idle(); };
  front.tasks = [](int) { return stuck_requests(3); };
  add_front(bundle, front);
  const auto a = diagnose_captured(bundle);
  ASSERT_EQ(a.verdicts.size(), 1u);
  const auto& v = a.verdicts.front();
  EXPECT_EQ(v.id, "serving-stalled");
  EXPECT_TRUE(v.diverged_ranks.empty());
  EXPECT_EQ(v.summary.rfind("The API server (node0 pid 800) has 3 request tasks awaiting the "
                            "engine core's output, but the engine core (node0 pid 900) is idle, "
                            "waiting for input in ",
                            0),
            0u)
      << v.summary;
  EXPECT_NE(v.summary.find("EngineCoreProc._process_input_queue"), std::string::npos) << v.summary;
}

// A known bug (a signature rule) that explains the stuck worker comes first and explains the
// front-end verdict too, as it explains the worker's own.
TEST(ServingChain, ASignatureThatExplainsTheWorkerExplainsTheChain) {
  auto bundle = stuck_workers().bundle();
  Front front;
  front.engine = [](int) { return engine_blocked(); };
  front.tasks = [](int) { return stuck_requests(37); };
  add_front(bundle, front);
  rules::RuleSet rules;
  rules.rules.push_back(rules::parse_rule(R"({
    "id": "kv-save-hang", "title": "A KV connector's save never finished",
    "description": "test rule", "confidence": 0.8,
    "groups": {
      "stuck": {"frames": [{"function": "execute_model", "file": "vllm/v1/worker/gpu_model_runner.py"}],
                "wait_kinds": ["lock"]},
      "waiting": {"frames": [{"function": "all_reduce"}], "wait_kinds": ["collective"]}
    },
    "diverged": "stuck", "waiting": "waiting",
    "summary": "Rank {stuck.members} never finished its KV save.",
    "explains": ["rank-diverged", "rank-straggler"]
  })",
                                          "test"));
  const auto a = diagnose_captured(bundle, rules);
  ASSERT_GE(a.verdicts.size(), 3u);
  EXPECT_EQ(a.verdicts[0].id, "kv-save-hang");
  EXPECT_EQ(a.verdicts[1].id, "serving-stalled");
  EXPECT_EQ(a.verdicts[1].explained_by, "kv-save-hang");
  EXPECT_EQ(a.verdicts[2].explained_by, "kv-save-hang");
}

// `vllm serve` serving in-process is the API server even when its tasks were not read; the same
// command waiting for the API servers and engine cores it launched is not.
TEST(ServingChain, VllmServeIsTheApiServerUnlessItLaunchesThem) {
  const std::string serve = kSite + "vllm/entrypoints/cli/serve.py";
  {
    auto bundle = stuck_workers().bundle();
    Front front;
    front.engine = [](int) { return engine_blocked(); };
    front.tasks = [](int) { return std::vector<model::AsyncTask>{}; };
    front.api_cmdline = "/usr/bin/python3 /usr/local/bin/vllm serve m --tensor-parallel-size 4";
    front.api_main = serve;
    add_front(bundle, front);
    const auto a = diagnose_captured(bundle);
    ASSERT_EQ(a.serving.size(), 1u);
    ASSERT_EQ(a.serving[0].api_servers.size(), 1u);
    EXPECT_EQ(a.serving[0].api_servers[0].process->pid, kApiPid);
  }
  {
    auto bundle = stuck_workers().bundle();
    Front front;
    front.engine = [](int) { return engine_blocked(); };
    front.tasks = [](int) { return std::vector<model::AsyncTask>{}; };
    front.api_cmdline = "/usr/bin/python3 /usr/local/bin/vllm serve m --api-server-count 2";
    front.api_frames = {native("clock_nanosleep"),
                        py("wait", "/usr/lib/python3.12/multiprocessing/connection.py", 1136),
                        py("wait_for_completion_or_failure", serve, 240),
                        py("run_multi_api_server", serve, 200), py("cmd", serve, 60)};
    add_front(bundle, front);
    const auto a = diagnose_captured(bundle);
    ASSERT_EQ(a.serving.size(), 1u);
    EXPECT_TRUE(a.serving[0].api_servers.empty());
    ASSERT_FALSE(a.verdicts.empty());
    EXPECT_EQ(a.verdicts[0].id, "serving-stalled");  // the engine core's stack alone
  }
}

// Without any serving process the verdicts are the job's own.
TEST(ServingChain, NoServingProcessLeavesTheVerdictsAlone) {
  auto bundle = stuck_workers().bundle();
  const auto a = diagnose_captured(bundle);
  EXPECT_TRUE(a.serving.empty());
  ASSERT_FALSE(a.verdicts.empty());
  EXPECT_NE(a.verdicts.front().id, "serving-stalled");
  EXPECT_EQ(a.verdicts.front().diverged_ranks, std::vector<int>{3});
  const auto md = report::report_markdown(bundle, a);
  EXPECT_EQ(md.find("## Serving chain"), std::string::npos);
}

// SGLang: the tokenizer manager's request tasks await the schedulers (ranks started by the API
// server); scheduler rank 1 is stuck while rank 0 waits for it.
TEST(ServingChain, SglangRequestTasksLeadToTheStuckScheduler) {
  JobBuilder b(2, "127.0.0.1:40555");
  b.parent(kApiPid);
  b.rank(0, worker_in_all_reduce(), 'S', 0, 4).distributed(0, world(0, 2));
  b.rank(1, worker_stuck_in_runner(), 'S', 0, 4).distributed(1, world(1, 2));
  auto bundle = b.bundle();
  Front front;
  front.api_cmdline = "/usr/bin/python3 -m sglang.launch_server --model-path m --tp 2";
  front.api_main = kSite + "sglang/launch_server.py";
  front.tasks = [](int) {
    std::vector<model::AsyncTask> tasks = {
        task(0x7f00000a0000, "Task-2",
             {method("TokenizerManager.handle_loop", kTokenizerManager, 1400)}, "Future")};
    for (int i = 0; i < 4; ++i) {
      tasks.push_back(task(0x7f0000e00000 + 0x1000 * static_cast<std::uint64_t>(i),
                           "Task-" + std::to_string(i + 9),
                           {method("Event.wait", kAsyncioLocks, 212),
                            method("TokenizerManager._wait_one_response", kTokenizerManager, 926),
                            method("TokenizerManager.generate_request", kTokenizerManager, 640)},
                           "Event.wait"));
    }
    return tasks;
  };
  add_front(bundle, front);
  const auto a = diagnose_captured(bundle);
  ASSERT_FALSE(a.verdicts.empty());
  const auto& top = a.verdicts.front();
  EXPECT_EQ(top.id, "serving-stalled");
  EXPECT_EQ(top.diverged_ranks, std::vector<int>{1});
  EXPECT_EQ(top.summary.rfind("Scheduler rank 1 (node0 pid 1001) is stuck in Event.wait", 0), 0u)
      << top.summary;
  EXPECT_NE(top.summary.find("the API server (node0 pid 800) has 4 request tasks awaiting the "
                             "ranks of job 127.0.0.1:40555, and rank 0 waits"),
            std::string::npos)
      << top.summary;
  ASSERT_EQ(a.serving.size(), 1u);
  EXPECT_EQ(a.serving[0].framework, "sglang");
  EXPECT_EQ(a.serving[0].job_link, "the API server's child processes");
  // SGLang's words: schedulers, no engine core; outputs come back through the detokenizer.
  EXPECT_EQ(top.title, "Requests are stuck behind a scheduler rank of the serving deployment");
  const auto& links = a.serving[0].links;
  EXPECT_TRUE(std::any_of(links.begin(), links.end(), [](const std::string& l) {
    return l.find("4 request tasks awaiting the schedulers' output") != std::string::npos &&
           l.find("pulling the detokenizer's outputs") != std::string::npos &&
           l.find("engine") == std::string::npos;
  })) << ::testing::PrintToString(links);
  // Where its requests wait: their own innermost frame (asyncio's Event.wait is what they await).
  ASSERT_EQ(a.serving[0].api_servers.size(), 1u);
  EXPECT_EQ(a.serving[0].api_servers[0].requests_wait_in,
            "TokenizerManager._wait_one_response (sglang/srt/managers/tokenizer_manager.py:926), "
            "awaiting Event.wait");
}

model::Socket unix_socket(std::uint64_t inode, std::uint64_t peer, std::string path = "") {
  model::Socket s;
  s.family = model::Socket::Family::kUnix;
  s.fd = 10;
  s.inode = inode;
  s.type = "stream";
  s.state = model::SocketState::kEstablished;  // connected
  s.path = std::move(path);
  s.peer_inode = peer;
  return s;
}

model::Socket tcp_socket(std::uint64_t inode, std::string local, std::string remote,
                         model::SocketState state = model::SocketState::kEstablished) {
  model::Socket s;
  s.family = model::Socket::Family::kTcp;
  s.fd = 11;
  s.inode = inode;
  s.type = "stream";
  s.state = state;
  s.local = std::move(local);
  s.remote = std::move(remote);
  return s;
}

// Two API servers and two engine cores, each engine core the child of one API server and
// each with its own workers' job, all on node0: API server 800 starts engine core 900, API
// server 801 starts engine core 901. `sockets`: they hold sockets that pair them crosswise
// (800 with 901 over a unix socket, 801 with 900 over TCP), as processes started by one
// launcher and handed their endpoints would.
model::Bundle crosswise_front(bool sockets) {
  auto bundle = stuck_workers().bundle();  // job 127.0.0.1:40123, ranks 1000-1003 under 900
  JobBuilder other(2, "127.0.0.1:40200");
  other.parent(kEnginePid + 1);
  other.rank(0, worker_idle_in_ring(), 'S', 0, 4).rank(1, worker_idle_in_ring(), 'S', 0, 4);
  for (auto& s : other.bundle().snapshots) {
    for (auto& mine : bundle.snapshots) {
      if (mine.node_name != s.node_name || mine.sample_index != s.sample_index) continue;
      for (auto p : s.processes) {
        p.pid += 100;  // ranks 1100, 1101
        p.dump->pid = p.pid;
        p.dump->threads[0].tid = p.pid;
        mine.processes.push_back(std::move(p));
      }
    }
  }
  for (auto& s : bundle.snapshots) {
    for (int i = 0; i < 2; ++i) {
      auto api = front_process(kApiPid + i, 1, "",
                               "/usr/bin/python3 -m vllm.entrypoints.openai."
                               "api_server --model m",
                               event_loop_idle(kApiServer), 'S', 500);
      api.identity.role = model::ProcessRole::kUnidentified;
      api.dump->tasks = stuck_requests(2);
      auto engine = front_process(kEnginePid + i, kApiPid + i, "VLLM::EngineCore",
                                  "VLLM::EngineCore", engine_blocked(), 'S', 300);
      if (sockets && i == 0) {
        api.dump->sockets = {unix_socket(5001, 6001)};
        engine.dump->sockets = {tcp_socket(7001, "10.0.0.2:41000", "10.0.0.1:5555")};
      } else if (sockets) {
        api.dump->sockets = {
            tcp_socket(7000, "10.0.0.1:5555", "0.0.0.0:0", model::SocketState::kListen),
            tcp_socket(7002, "10.0.0.1:5555", "10.0.0.2:41000")};
        engine.dump->sockets = {unix_socket(6001, 5001, "/tmp/7c2e-input.ipc")};
      }
      s.processes.push_back(std::move(api));
      s.processes.push_back(std::move(engine));
    }
  }
  return bundle;
}

const ServingChain* chain_of(const Analysis& a, const std::string& job) {
  for (const auto& chain : a.serving) {
    if (chain.job == job) return &chain;
  }
  return nullptr;
}

// The socket pairs win over parent pids: each engine core's chain holds the API server it is
// connected to, and its links say over what.
TEST(ServingChain, ApiServersAreLinkedToTheEngineCoresTheyAreConnectedTo) {
  {
    auto bundle = crosswise_front(false);
    const auto a = diagnose_captured(bundle);
    const auto* first = chain_of(a, "127.0.0.1:40123");
    ASSERT_NE(first, nullptr);
    ASSERT_EQ(first->api_servers.size(), 1u);
    EXPECT_EQ(first->api_servers[0].process->pid, kApiPid);  // by parent pid
    EXPECT_EQ(first->api_servers[0].link,
              "parent of engine core node0 pid 900 (no socket between them captured)");
  }
  auto bundle = crosswise_front(true);
  const auto a = diagnose_captured(bundle);
  ASSERT_EQ(a.serving.size(), 2u);
  const auto* first = chain_of(a, "127.0.0.1:40123");
  const auto* second = chain_of(a, "127.0.0.1:40200");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(first->engines.size(), 1u);
  EXPECT_EQ(first->engines[0].process->pid, kEnginePid);
  ASSERT_EQ(first->api_servers.size(), 1u);
  EXPECT_EQ(first->api_servers[0].process->pid, kApiPid + 1);
  EXPECT_EQ(first->api_servers[0].link,
            "connected to engine core node0 pid 900 over tcp 10.0.0.1:5555");
  ASSERT_EQ(second->api_servers.size(), 1u);
  EXPECT_EQ(second->api_servers[0].process->pid, kApiPid);
  EXPECT_EQ(second->api_servers[0].link,
            "connected to engine core node0 pid 901 over ipc:///tmp/7c2e-input.ipc");
  ASSERT_FALSE(second->links.empty());
  EXPECT_NE(second->links[0].find("API server (node0 pid 800): "), std::string::npos)
      << second->links[0];
  EXPECT_NE(second->links[0].find("; connected to engine core node0 pid 901 over ipc:///tmp/"
                                  "7c2e-input.ipc"),
            std::string::npos)
      << second->links[0];
}

// A loopback TCP connection pairs processes of one node only: 127.0.0.1:5555 on two nodes is
// two different sockets.
// A process without captured sockets (an older file) pairs by its net.tcp fact
// (model::tcp_connections); the fact names no listener, so the listening end is the one the
// other process's sockets do not listen on: the same link, whichever side is read from the fact.
TEST(ServingChain, AProcessWithoutSocketsPairsByItsNetTcpFact) {
  for (const pid_t from_fact : {kEnginePid, kApiPid + 1}) {
    auto bundle = crosswise_front(true);
    for (auto& s : bundle.snapshots) {
      for (auto& p : s.processes) {
        if (p.pid != from_fact) continue;
        p.dump->sockets.edit().clear();
        p.facts[model::fact_keys::kNetTcp] = from_fact == kEnginePid
                                                 ? "10.0.0.2:41000>10.0.0.1:5555"
                                                 : "10.0.0.1:5555>10.0.0.2:41000";
      }
    }
    const auto a = diagnose_captured(bundle);
    const auto* first = chain_of(a, "127.0.0.1:40123");
    ASSERT_NE(first, nullptr) << from_fact;
    ASSERT_EQ(first->api_servers.size(), 1u) << from_fact;
    EXPECT_EQ(first->api_servers[0].process->pid, kApiPid + 1) << from_fact;
    EXPECT_EQ(first->api_servers[0].link,
              "connected to engine core node0 pid 900 over tcp 10.0.0.1:5555")
        << from_fact;
  }
}

TEST(ServingChain, LoopbackConnectionsDoNotPairProcessesOfTwoNodes) {
  auto bundle = crosswise_front(false);
  for (auto& s : bundle.snapshots) {
    for (auto& p : s.processes) {
      if (p.pid == kApiPid + 1) {
        p.dump->sockets = {tcp_socket(7002, "127.0.0.1:5555", "127.0.0.1:41000")};
      } else if (p.pid == kEnginePid) {
        p.dump->sockets = {tcp_socket(7001, "127.0.0.1:41000", "127.0.0.1:5555")};
      }
    }
  }
  {
    const auto a = diagnose_captured(bundle);
    const auto* first = chain_of(a, "127.0.0.1:40123");
    ASSERT_NE(first, nullptr);
    // One node: paired (and API server 800, connected to nothing, by parent pid).
    bool paired = false;
    for (const auto& api : first->api_servers) {
      if (api.process->pid == kApiPid + 1) {
        paired = true;
        EXPECT_EQ(api.link, "connected to engine core node0 pid 900 over tcp 127.0.0.1:5555");
      }
    }
    EXPECT_TRUE(paired);
  }
  for (auto& s : bundle.snapshots) {
    std::erase_if(s.processes, [](const auto& p) { return p.pid == kEnginePid; });
  }
  // The engine core on another node, holding the same loopback addresses.
  const auto moved = crosswise_front(false);
  for (const auto& s : moved.snapshots) {
    for (const auto& p : s.processes) {
      if (p.pid != kEnginePid) continue;
      model::NodeSnapshot node = s;
      node.node_name = node.hostname = "node9";
      node.processes = {p};
      node.processes[0].dump->sockets = {tcp_socket(7001, "127.0.0.1:41000", "127.0.0.1:5555")};
      bundle.snapshots.push_back(std::move(node));
    }
  }
  bundle.nodes.push_back({"node9", "node9:7447", model::NodeState::kOk, "", 0});
  const auto a = diagnose_captured(bundle);
  for (const auto& chain : a.serving) {
    for (const auto& api : chain.api_servers) {
      EXPECT_EQ(api.link.find("over tcp"), std::string::npos) << api.link;
    }
  }
}

// The engine core's workers: the job whose ranks are connected to it, though it started none.
TEST(ServingChain, TheEngineCoresWorkersAreTheRanksConnectedToIt) {
  auto bundle = crosswise_front(false);
  for (auto& s : bundle.snapshots) {
    for (auto& p : s.processes) {
      if (p.pid == kEnginePid) {
        p.dump->sockets = {unix_socket(8000, 8100, "@vllm-workers")};
      } else if (p.pid == 1100) {
        p.dump->sockets = {unix_socket(8100, 8000)};
      }
    }
  }
  const auto a = diagnose_captured(bundle);
  const ServingChain* chain = nullptr;
  for (const auto& c : a.serving) {
    for (const auto& e : c.engines) {
      if (e.process->pid == kEnginePid) chain = &c;
    }
  }
  ASSERT_NE(chain, nullptr);
  EXPECT_EQ(chain->job, "127.0.0.1:40200");
  EXPECT_EQ(chain->job_link, "ranks connected to the engine core over unix socket @vllm-workers");
}

// The main thread of `python -m sglang.launch_server` on a node with --node-rank >= 1: its
// schedulers started, it serves /health on its own event loop.
std::vector<model::Frame> sglang_health_check_only() {
  return {native("epoll_wait"),
          method("EpollSelector.select", kSelectors, 468),
          method("BaseEventLoop._run_once", kBaseEvents, 1949),
          method("BaseEventLoop.run_forever", kBaseEvents, 641),
          method("BaseEventLoop.run_until_complete", kBaseEvents, 674),
          method("Runner.run", "/usr/lib/python3.12/asyncio/runners.py", 118),
          py("launch_dummy_health_check_server", kSite + "sglang/srt/utils.py", 2210),
          py("_launch_subprocesses", kSite + "sglang/srt/entrypoints/engine.py", 640),
          py("launch_server", kSglangHttpServer, 1010),
          py("<module>", kSglangLaunchServer, 14)};
}

// A two-node SGLang deployment as it really looks (tools/repro/sglang_serving.py): node0's HTTP
// server whose /generate handlers await the TokenizerManager's async generator (their
// chain ending in the handler, as a snapshot without the async generator's frames has it), its
// schedulers TP0-1; node1's launcher serving only /health, its schedulers TP2-3, TP3 stuck. The
// handlers are the request tasks, the chain names scheduler rank 3, and node1's launcher is no API
// server.
TEST(ServingChain, SglangTwoNodesHandlersAwaitTheGeneratorAndTheOtherLauncherIsNoApiServer) {
  JobBuilder b(4, "198.51.100.1:5000");
  b.parent(kApiPid);
  for (int r = 0; r < 3; ++r) {
    b.rank(r, worker_in_all_reduce(), 'S', 0, 2).distributed(r, world(r, 4));
  }
  b.rank(3, worker_stuck_in_runner(), 'S', 0, 2).distributed(3, world(3, 4));
  auto bundle = b.bundle();
  Front front;
  front.api_cmdline =
      "/usr/bin/python3 -m sglang.launch_server --model-path m --tp 4 --nnodes 2 --node-rank 0 "
      "--dist-init-addr 198.51.100.1:5000";
  front.api_main = kSglangLaunchServer;
  front.tasks = [](int) {
    std::vector<model::AsyncTask> tasks = {
        task(0x7f00000a0000, "Task-2",
             {method("TokenizerManager.handle_loop", kTokenizerManager, 1400),
              py("print_exception_wrapper", kSite + "sglang/srt/utils.py", 1990)},
             "Future")};
    for (int i = 0; i < 23; ++i) {
      tasks.push_back(task(0x7f0000e00000 + 0x1000 * static_cast<std::uint64_t>(i),
                           "Task-" + std::to_string(i + 9),
                           {py("generate_request", kSglangHttpServer, 431)}, "Future"));
    }
    return tasks;
  };
  add_front(bundle, front);
  for (auto& s : bundle.snapshots) {
    if (s.node_name != "node1") continue;
    auto launcher =
        front_process(kApiPid, 1, "",
                      "/usr/bin/python3 -m sglang.launch_server --model-path m --tp 4 --nnodes 2 "
                      "--node-rank 1 --dist-init-addr 198.51.100.1:5000",
                      sglang_health_check_only(), 'S', 500);
    launcher.dump->tasks = {task(0x7f00000b0000, "Task-1",
                                 {py("serve", kSite + "sglang/srt/utils.py", 2200)}, "Future")};
    s.processes.push_back(std::move(launcher));
  }
  const auto a = diagnose_captured(bundle);
  ASSERT_EQ(a.serving.size(), 1u);
  const auto& chain = a.serving[0];
  EXPECT_EQ(chain.framework, "sglang");
  EXPECT_EQ(chain.job, "198.51.100.1:5000");
  EXPECT_EQ(chain.job_link, "the API server's child processes");
  ASSERT_EQ(chain.api_servers.size(), 1u);
  EXPECT_EQ(chain.api_servers[0].node, "node0");
  EXPECT_EQ(chain.api_servers[0].pending_requests, 23u);
  EXPECT_EQ(chain.api_servers[0].stuck_requests, 23u);
  EXPECT_EQ(chain.api_servers[0].output_handlers, 1u);
  EXPECT_EQ(chain.api_servers[0].requests_wait_in.rfind("generate_request (", 0), 0u)
      << chain.api_servers[0].requests_wait_in;
  ASSERT_FALSE(a.verdicts.empty());
  const auto& top = a.verdicts.front();
  EXPECT_EQ(top.id, "serving-stalled");
  EXPECT_EQ(top.diverged_ranks, std::vector<int>{3});
  EXPECT_EQ(top.summary.rfind("Scheduler rank 3 (node1 pid 1003) is stuck in Event.wait", 0), 0u)
      << top.summary;
  EXPECT_NE(top.summary.find("the API server (node0 pid 800) has 23 request tasks awaiting the "
                             "ranks of job 198.51.100.1:5000, and ranks 0-2 wait for it in "),
            std::string::npos)
      << top.summary;
  const auto md = report::report_markdown(bundle, a);
  EXPECT_EQ(md.rfind("# hangscope: Scheduler rank 3 (node1 pid 1003)", 0), 0u) << md.substr(0, 300);
}

}  // namespace
}  // namespace hangscope::analysis

namespace hangscope::analysis {
namespace {

// A record of a snapshot written before roles were decided at capture: the engine core (parent
// of the workers, no title) a launcher, the API server unidentified.
model::ProcessRecord old_record(pid_t pid, pid_t ppid, model::ProcessRole role,
                                std::vector<model::Frame> frames) {
  model::ProcessRecord p;
  p.pid = pid;
  p.ppid = ppid;
  p.identity.role = role;
  model::ProcessDump dump;
  dump.pid = pid;
  dump.threads.push_back(testing_builders::thread(pid, 'S', std::move(frames)));
  p.dump = std::move(dump);
  return p;
}

TEST(ServingRoles, AnOldSnapshotsEngineCoreAndApiServerAreReadAsWhatTheyAre) {
  std::vector<model::ProcessRecord> node = {
      old_record(800, 1, model::ProcessRole::kUnidentified, event_loop_idle(kApiServer)),
      old_record(900, 800, model::ProcessRole::kLauncher, engine_blocked()),
      old_record(1000, 900, model::ProcessRole::kRank, worker_in_all_reduce())};
  node[0].dump->tasks = stuck_requests(3);
  EXPECT_EQ(waits::assign_serving_roles(node), 2u);
  EXPECT_EQ(node[0].identity.role, model::ProcessRole::kApi);
  EXPECT_EQ(node[1].identity.role, model::ProcessRole::kEngine);
  EXPECT_EQ(node[2].identity.role, model::ProcessRole::kRank);  // a rank stays a rank
  // Decided once: a second pass (a snapshot written by this version) changes nothing.
  EXPECT_EQ(waits::assign_serving_roles(node), 0u);
}

}  // namespace
}  // namespace hangscope::analysis

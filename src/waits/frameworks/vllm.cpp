// vLLM (V1 and the V0 engine client): the shared-memory broadcast ring; the serving front (API
// server, engine core busy loop, executor, DP coordinator); its GroupCoordinators; its process
// titles (VLLM::Worker_TP1, …) and data-parallel variables.
#include "hangscope/waits/frameworks.h"
#include "table_entries.h"

namespace hangscope::waits {
using table_entries::py;

const FrameworkTable& vllm_table() {
  static const FrameworkTable table{
      .name = "vllm",
      .python_waits =
          {
              {py("vllm/distributed/device_communicators/shm_broadcast.py",
                  {"acquire_read", "acquire_write", "dequeue", "enqueue"}),
               WaitKind::kRing, ""},
          },
      .frames =
          {
              {FrameMeaning::kRequest,
               py("vllm/v1/engine/output_processor.py", {"get"})},  // RequestOutputCollector.get
              {FrameMeaning::kRequest, py("vllm/v1/engine/async_llm.py", {"generate", "encode"})},
              {FrameMeaning::kRequest,
               py("vllm/engine/async_llm_engine.py", {"generate", "encode"})},
              {FrameMeaning::kRequest,
               py("vllm/entrypoints/openai/serving_chat.py",
                  {"create_chat_completion", "chat_completion_full_generator",
                   "chat_completion_stream_generator"})},
              {FrameMeaning::kRequest, py("vllm/entrypoints/openai/serving_completion.py",
                                          {"create_completion", "completion_full_generator",
                                           "completion_stream_generator"})},
              {FrameMeaning::kRequest, py("vllm/entrypoints/openai/api_server.py",
                                          {"create_chat_completion", "create_completion"})},
              {FrameMeaning::kEngineClient,
               py("vllm/v1/engine/async_llm.py", {"generate", "encode"})},
              {FrameMeaning::kEngineClient,
               py("vllm/engine/async_llm_engine.py", {"generate", "encode"})},
              {FrameMeaning::kOutputHandler, py("vllm/v1/engine/async_llm.py", {"output_handler"})},
              {FrameMeaning::kOutputHandler,
               py("vllm/v1/engine/core_client.py", {"get_output_async", "process_outputs_socket"})},
              {FrameMeaning::kApiServerThread, py("vllm/entrypoints/openai/api_server.py")},
              {FrameMeaning::kApiServerThread, py("vllm/entrypoints/launcher.py", {"serve_http"})},
              // `vllm serve`'s own process: the API server when it serves in-process
              // (uvloop.run(run_server)), a launcher of API servers and engine cores when it waits
              // for them.
              {FrameMeaning::kServeCommand, py("vllm/entrypoints/cli/serve.py")},
              {FrameMeaning::kServeLauncher,
               py("vllm/entrypoints/cli/serve.py",
                  {"run_multi_api_server", "wait_for_completion_or_failure", "run_headless"})},
              // The engine core's busy loop (V1, synchronous: its thread stack shows the edge).
              {FrameMeaning::kBusyLoop,
               py("vllm/v1/engine/core.py", {"run_busy_loop", "run_engine_core"})},
              // A step in flight: the busy loop inside the engine's step, waiting for the executor.
              {FrameMeaning::kEngineStep,
               py("vllm/v1/engine/core.py",
                  {"step", "step_with_batch_queue", "_process_engine_step", "execute_dummy_batch",
                   "execute_model"})},
              {FrameMeaning::kEngineStep, py("vllm/v1/executor/")},
              {FrameMeaning::kExecutor, py("vllm/v1/executor/")},
              {FrameMeaning::kCoordinator, py("vllm/v1/engine/coordinator.py")},
              {FrameMeaning::kRingWrite, py("shm_broadcast.py", {"acquire_write", "enqueue"})},
          },
      .group_modules = {{
          .module = "vllm.distributed.parallel_state",
          .coordinator = CoordinatorFields{.torch_groups = {"device_group", "cpu_group"},
                                           .rank_in_group = "rank_in_group",
                                           .ranks = "ranks",
                                           .unique_name = "unique_name"},
          .globals = {{"_WORLD", "world"},
                      {"_TP", "tp"},
                      {"_PP", "pp"},
                      {"_DP", "dp"},
                      {"_EP", "ep"},
                      {"_DCP", "dcp"},
                      {"_MOE_EP", "ep"},
                      {"_MOE_TP", "moe_tp"},
                      {"_ATTN_TP", "attn_tp"}},
      }},
      // VLLM::Worker[_DP{d}][_PP{p}][_TP{t}][_EP{e}], VLLM::EngineCore[_DP{d}],
      // VLLM::APIServer_{i}, VLLM::DPCoordinator, after VLLM_PROCESS_NAME_PREFIX if any.
      .title =
          ProcessTitle{
              .marker = "VLLM::",
              .after_prefix = true,
              .names = {{TitleName::Match::kWord, "Worker", model::ProcessRole::kRank,
                         TitleRanks::kSuffix},
                        {TitleName::Match::kWord, "EngineCore", model::ProcessRole::kEngine,
                         TitleRanks::kSuffix},
                        {TitleName::Match::kWord, "APIServer", model::ProcessRole::kApi},
                        {TitleName::Match::kWord, "DPCoordinator",
                         model::ProcessRole::kCoordinator}},
          },
      // Data parallelism's master: the job of every DP rank.
      .job_variables = JobVariables{.prefix = "vllm-dp:",
                                    .required = {"VLLM_DP_MASTER_IP"},
                                    .optional = {"VLLM_DP_MASTER_PORT"}},
      .coordinate_variables = {{"VLLM_DP_RANK", "dp"}},
      // initialize_model_parallel: "rank 3 in world size 4 is assigned as DP rank 0, PP rank 1,
      // TP rank 1, EP rank N/A".
      .coordinate_log_lines = {{R"(rank (\d+) in world size \d+ is assigned as DP rank (\d+), )"
                                R"(PP rank (\d+), TP rank (\d+))",
                                {"dp", "pp", "tp"}}},
      .serving =
          ServingFront{
              .command_word = "",
              .by_default = true,
              .rank_noun = "worker",
              .requests_await = "the engine's output",
              .output_handlers_pull = "the engine core's outputs",
              // multiproc_executor.py: the worker handle `w` of get_response (a dataclass whose
              // repr says `rank=N`), collective_rpc's `unique_reply_rank`.
              .awaited_worker_locals = {{"get_response", "w",
                                         AwaitedWorkerLocal::Holds::kRankInRepr,
                                         "the worker handle `w` of get_response"},
                                        {"collective_rpc", "unique_reply_rank",
                                         AwaitedWorkerLocal::Holds::kRank,
                                         "collective_rpc's `unique_reply_rank`"}},
          },
  };
  return table;
}

}  // namespace hangscope::waits

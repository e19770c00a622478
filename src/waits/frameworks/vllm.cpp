// vLLM (V1 and the V0 engine client): the shared-memory broadcast ring, and the serving
// front: API server, engine core busy loop, executor, DP coordinator.
#include "hangscope/waits/frameworks.h"
#include "table_entries.h"

namespace hangscope::waits {
using table_entries::py;

const FrameworkTable& vllm_table() {
  static const FrameworkTable table{
      "vllm",
      {
          {py("vllm/distributed/device_communicators/shm_broadcast.py",
              {"acquire_read", "acquire_write", "dequeue", "enqueue"}),
           WaitKind::kRing, ""},
      },
      {},
      {
          {FrameMeaning::kRequest,
           py("vllm/v1/engine/output_processor.py", {"get"})},  // RequestOutputCollector.get
          {FrameMeaning::kRequest, py("vllm/v1/engine/async_llm.py", {"generate", "encode"})},
          {FrameMeaning::kRequest, py("vllm/engine/async_llm_engine.py", {"generate", "encode"})},
          {FrameMeaning::kRequest, py("vllm/entrypoints/openai/serving_chat.py",
                                      {"create_chat_completion", "chat_completion_full_generator",
                                       "chat_completion_stream_generator"})},
          {FrameMeaning::kRequest,
           py("vllm/entrypoints/openai/serving_completion.py",
              {"create_completion", "completion_full_generator", "completion_stream_generator"})},
          {FrameMeaning::kRequest, py("vllm/entrypoints/openai/api_server.py",
                                      {"create_chat_completion", "create_completion"})},
          {FrameMeaning::kEngineClient, py("vllm/v1/engine/async_llm.py", {"generate", "encode"})},
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
           py("vllm/v1/engine/core.py", {"step", "step_with_batch_queue", "_process_engine_step",
                                         "execute_dummy_batch", "execute_model"})},
          {FrameMeaning::kEngineStep, py("vllm/v1/executor/")},
          {FrameMeaning::kExecutor, py("vllm/v1/executor/")},
          {FrameMeaning::kCoordinator, py("vllm/v1/engine/coordinator.py")},
          {FrameMeaning::kRingWrite, py("shm_broadcast.py", {"acquire_write", "enqueue"})},
      },
  };
  return table;
}

}  // namespace hangscope::waits

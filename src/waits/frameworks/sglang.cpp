// SGLang: the serving front (tokenizer manager, HTTP and OpenAI handlers) and the launcher of
// a node that only serves /health; its GroupCoordinators (a copy of vLLM's) and its schedulers'
// titles. Its schedulers are ranks (torch tables).
#include "hangscope/waits/frameworks.h"
#include "table_entries.h"

namespace hangscope::waits {
using table_entries::py;

const FrameworkTable& sglang_table() {
  static const FrameworkTable table{
      .name = "sglang",
      .frames =
          {
              {FrameMeaning::kRequest,
               py("sglang/srt/managers/tokenizer_manager.py",
                  {"_wait_one_response", "generate_request", "_handle_batch_request"})},
              // The handlers take the tokenizer manager's outputs from its async generator
              // (`await generate_request(...).__anext__()`, `async for`); the chain goes on into
              // it.
              {FrameMeaning::kRequest,
               py("sglang/srt/entrypoints/http_server.py",
                  {"generate_request", "openai_v1_completions", "openai_v1_chat_completions",
                   "v1_completions", "v1_chat_completions"})},
              {FrameMeaning::kRequest,
               py("sglang/srt/entrypoints/openai/serving_base.py", {"handle_request"})},
              {FrameMeaning::kRequest,
               py("sglang/srt/entrypoints/openai/serving_chat.py",
                  {"_handle_non_streaming_request", "_generate_chat_stream"})},
              {FrameMeaning::kRequest,
               py("sglang/srt/entrypoints/openai/serving_completions.py",
                  {"_handle_non_streaming_request", "_generate_completion_stream"})},
              {FrameMeaning::kEngineClient, py("sglang/srt/managers/tokenizer_manager.py",
                                               {"_wait_one_response", "generate_request"})},
              {FrameMeaning::kOutputHandler,
               py("sglang/srt/managers/tokenizer_manager.py", {"handle_loop"})},
              {FrameMeaning::kApiServerThread, py("sglang/srt/entrypoints/http_server.py")},
              // The launcher on a node with --node-rank >= 1: it started the node's schedulers and
              // only serves /health (its stack passes through http_server.py's launch_server).
              {FrameMeaning::kHealthCheckOnly,
               py("sglang/srt/utils", {"launch_dummy_health_check_server"})},
          },
      .group_modules = {{
          .module = "sglang.srt.distributed.parallel_state",
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
      // sglang::scheduler[_DP{d}][_PP{p}][_TP{t}]
      .title =
          ProcessTitle{
              .marker = "sglang::",
              .names = {{TitleName::Match::kWord, "scheduler", model::ProcessRole::kRank,
                         TitleRanks::kSuffix}},
          },
      .serving =
          ServingFront{
              .command_word = "sglang",
              .rank_noun = "scheduler",  // one per TP rank (sglang::scheduler_TP<r>)
              .requests_await = "the schedulers' output",
              .output_handlers_pull = "the detokenizer's outputs",
          },
  };
  return table;
}

}  // namespace hangscope::waits

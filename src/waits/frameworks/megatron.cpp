// Megatron-LM (megatron.core): the module globals of parallel_state that hold its torch groups,
// one per parallel dimension. Its ranks' waits are torch's.
#include "hangscope/waits/frameworks.h"

namespace hangscope::waits {

const FrameworkTable& megatron_table() {
  static const FrameworkTable table{
      .name = "megatron",
      .group_modules = {{
          .module = "megatron.core.parallel_state",
          .globals = {{"_TENSOR_MODEL_PARALLEL_GROUP", "tp"},
                      {"_PIPELINE_MODEL_PARALLEL_GROUP", "pp"},
                      {"_DATA_PARALLEL_GROUP", "dp"},
                      {"_EXPERT_MODEL_PARALLEL_GROUP", "ep"}},
      }},
  };
  return table;
}

}  // namespace hangscope::waits

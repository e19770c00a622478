// What hangscope knows of each framework, one data table per framework (src/waits/frameworks/:
// torch, vLLM, SGLang, Megatron, Ray, the Python standard library and its servers): the wait
// primitives a thread can stand in; the frames that say what a process is or does (a serving
// front's request, an engine core's busy loop, a rank at init, …); the module globals that hold
// its process groups and the parallel dimension of each; its process titles and what they say;
// the environment variables that name a job, a rank or a parallel coordinate, and the log lines
// that give coordinates; and its serving
// front (how its API servers are recognised, the engine's locals that name an awaited worker,
// what its ranks are called). The readers (python, identity) and the analysis iterate over
// frameworks() and read the data: adding a framework or a version's renamed name is one table's
// edit.
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "hangscope/model/frame_pattern.h"
#include "hangscope/model/rank_identity.h"
#include "hangscope/waits/wait_point.h"

namespace hangscope::waits {

// A frame at which a thread waits: what it waits for, and the operation ("" = the frame's
// function).
struct WaitPrimitive {
  model::FramePattern pattern;
  WaitKind kind = WaitKind::kOther;
  std::string_view operation;
};

// What a frame says about its process, beyond the wait it stands in.
enum class FrameMeaning {
  // serving fronts (docs/analysis.md, "The serving chain")
  kRequest,          // an asyncio task's coroutine in a request (API server)
  kEngineClient,     // the engine client's frame of a request task: where it awaits the engine
  kOutputHandler,    // the task that pulls the engine's outputs into the request queues
  kApiServerThread,  // a thread of an API server's event loop
  kHealthCheckOnly,  // a launcher that serves only /health (SGLang, --node-rank >= 1)
  kServeCommand,     // `vllm serve`'s own process
  kServeLauncher,    // … while it launches API servers and engine cores
  kBusyLoop,         // the engine core's busy loop
  kEngineStep,       // a step in flight in the busy loop
  kExecutor,         // the executor's call the busy loop waits in
  kCoordinator,      // the DP coordinator
  // ranks
  kRingWrite,      // a writer of the shared-memory broadcast ring, waiting to write
  kInitCall,       // inside init_process_group / new_group (the rendezvous of a job's ranks)
  kInitArguments,  // an init frame whose locals hold rank, world size, store address
  kGlooTransport,  // gloo's transport (native)
  kMultiprocessingHelper,  // multiprocessing's own helpers' code (resource tracker, forkserver)
};

// A module global that holds one of a framework's process groups, and the parallel dimension
// the group spans ("tp", "pp", "dp", "ep", …; "world" is every rank).
struct GroupGlobal {
  std::string_view name;       // "_TP", "_TENSOR_MODEL_PARALLEL_GROUP"
  std::string_view dimension;  // "tp"
};

// The attributes of a group coordinator (vLLM's GroupCoordinator; SGLang keeps a copy of it):
// an object that wraps torch groups and knows the process's place in them.
struct CoordinatorFields {
  std::vector<std::string_view> torch_groups;  // attributes holding torch ProcessGroups
  std::string_view rank_in_group;              // the process's rank in the group
  std::string_view ranks;        // the members' global ranks (a group torch's registry lacks)
  std::string_view unique_name;  // the group's name, for such a group
};

// A module whose globals hold a framework's process groups, read from a rank's memory
// (python/process_groups.cpp). Its groups are labelled "FRAMEWORK:DIMENSION".
struct GroupModule {
  std::string_view module;  // "vllm.distributed.parallel_state"
  // How a global holds its group: through a coordinator, or (nullopt) as the torch group itself.
  std::optional<CoordinatorFields> coordinator = {};
  std::vector<GroupGlobal> globals = {};  // a dimension's first coordinate read is kept
};

// Which parallel ranks a process title carries (a "_DP{d}_PP{p}_TP{t}_EP{e}" suffix).
enum class TitleRanks {
  kNone,    // none
  kSuffix,  // the rest after the name's word is such a suffix, else the title says nothing
  kFromTp,  // from the name's first "_TP" on, as far as it reads (Ray v2's actor names)
};

// One kind of process a title names after its marker.
struct TitleName {
  enum class Match {
    kWord,      // the name up to its first '_' is `text`
    kContains,  // the name contains `text`
    kAny,       // every name
  };
  Match match = Match::kAny;
  std::string_view text;
  model::ProcessRole role = model::ProcessRole::kUnidentified;
  TitleRanks ranks = TitleRanks::kNone;
};

// A framework's process titles (setproctitle): a marker, then a name saying what the process is.
struct ProcessTitle {
  std::string_view marker;    // "VLLM::", "ray::"
  bool after_prefix = false;  // the marker may follow a prefix; else the title starts with it
  // The first that matches the name decides; when none does, the title says nothing.
  std::vector<TitleName> names = {};
};

// Environment variables whose values name a job: the key is `prefix` and the values joined by
// ':', when every `required` one is set.
struct JobVariables {
  std::string_view prefix;                      // "vllm-dp:"
  std::vector<std::string_view> required;       // "VLLM_DP_MASTER_IP"
  std::vector<std::string_view> optional = {};  // "VLLM_DP_MASTER_PORT"
};

// Environment variables a launcher gives each rank (torchrun, env://).
struct RankVariables {
  std::string_view rank;        // the global rank
  std::string_view local_rank;  // the rank on its node
  std::string_view world_size;
};

// An environment variable that holds a process's rank in one parallel dimension.
struct CoordinateVariable {
  std::string_view name;       // "VLLM_DP_RANK"
  std::string_view dimension;  // "dp"
};

// A line a framework logs at start-up that gives a rank's parallel coordinates (when the
// environment does not): an RE2 pattern whose first group is the global rank, then one group per
// dimension in `dimensions`. The newest such line of the rank's own log decides.
struct CoordinateLogLine {
  std::string_view pattern;
  std::vector<std::string_view> dimensions;  // "dp", "pp", "tp": the groups after the rank
};

// A local variable of an engine core's busy-loop frames that names the worker it waits for.
struct AwaitedWorkerLocal {
  enum class Holds {
    kRankInRepr,  // an object whose repr says `rank=N`
    kRank,        // the rank itself
  };
  std::string_view function;  // the frame's function: "get_response"
  std::string_view local;     // "w"
  Holds holds = Holds::kRank;
  std::string_view described;  // how the report names it
};

// A framework's serving front (docs/analysis.md, "The serving chain").
struct ServingFront {
  std::string_view command_word;  // in an API server's command line, says the framework ("" none)
  bool by_default = false;     // the framework of a chain whose API servers' command lines say none
  std::string_view rank_noun;  // what the chain's ranks are called: "worker"
  std::string_view requests_await;        // what request tasks await: "the engine's output"
  std::string_view output_handlers_pull;  // what output handlers pull: "the engine core's outputs"
  std::vector<AwaitedWorkerLocal> awaited_worker_locals = {};
};

struct FrameworkTable {
  std::string_view name;                         // "torch", "vllm", …
  std::vector<WaitPrimitive> python_waits = {};  // first match wins, in the frameworks' order
  std::vector<WaitPrimitive> native_waits = {};  // matched on the symbol's bare name
  std::vector<std::pair<FrameMeaning, model::FramePattern>> frames = {};
  std::vector<GroupModule> group_modules = {};  // where its process groups are kept
  std::optional<ProcessTitle> title = {};
  std::optional<JobVariables> job_variables = {};    // tried in the frameworks' order
  std::optional<RankVariables> rank_variables = {};  // tried in the frameworks' order
  std::vector<CoordinateVariable> coordinate_variables = {};
  std::vector<CoordinateLogLine> coordinate_log_lines = {};
  std::optional<ServingFront> serving = {};
};

// One table per framework (src/waits/frameworks/NAME.cpp).
const FrameworkTable& torch_table();
const FrameworkTable& vllm_table();
const FrameworkTable& sglang_table();
const FrameworkTable& megatron_table();
const FrameworkTable& ray_table();
const FrameworkTable& python_table();  // the standard library, multiprocessing, uvicorn

// Every framework's table, in the order their wait primitives are tried.
const std::vector<const FrameworkTable*>& frameworks();

// The table named `name`; nullptr when none is.
const FrameworkTable* framework_named(std::string_view name);

// The framework a serving chain is when its API servers' command lines name none (vLLM).
const FrameworkTable& default_serving_framework();

// The frames of every framework that mean `meaning`.
const model::FramePatterns& frames_meaning(FrameMeaning meaning);

// The first frame of `frames` (innermost first) that means `meaning`; nullptr when none.
template <typename Frames>
const model::Frame* find_meaning(const Frames& frames, FrameMeaning meaning) {
  return model::find_frame(frames, frames_meaning(meaning));
}

// Whether `frame` means `meaning`.
bool means(const model::Frame& frame, FrameMeaning meaning);

// Whether some thread's Python (or, for native meanings, native) frames mean `meaning`.
bool process_has(const model::ProcessDump& dump, FrameMeaning meaning);

}  // namespace hangscope::waits

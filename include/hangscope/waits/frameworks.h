// What the frameworks' frames mean, one data table per framework (src/waits/frameworks/: torch,
// vLLM, SGLang, Ray, the Python standard library and its servers): the wait primitives a thread
// can stand in, and the frames that say what a process is or does (a serving front's request,
// an engine core's busy loop, a rank at init, …). Every check of a framework's frame names
// looks here; adding a framework or a version's renamed function is one table's edit.
#pragma once

#include <string_view>
#include <vector>

#include "hangscope/model/frame_pattern.h"
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

struct FrameworkTable {
  std::string_view name;                    // "torch", "vllm", …
  std::vector<WaitPrimitive> python_waits;  // first match wins, in the frameworks' order
  std::vector<WaitPrimitive> native_waits;  // matched on the symbol's bare name
  std::vector<std::pair<FrameMeaning, model::FramePattern>> frames;
};

// One table per framework (src/waits/frameworks/NAME.cpp).
const FrameworkTable& torch_table();
const FrameworkTable& vllm_table();
const FrameworkTable& sglang_table();
const FrameworkTable& ray_table();
const FrameworkTable& python_table();  // the standard library, multiprocessing, uvicorn

// Every framework's table, in the order their wait primitives are tried.
const std::vector<const FrameworkTable*>& frameworks();

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

// The serving chain of a vLLM V1 or SGLang deployment: the API servers (asyncio programs whose
// request tasks await the engine's output), the engine cores (a synchronous busy loop that
// waits on its workers through vLLM's shared-memory broadcast ring), the DP coordinator, and
// the workers' job, whose wait-for graph leads from the worker the engine waits for to the
// rank that is stuck. The front-end verdict names that rank first (docs/analysis.md, "The
// serving chain"). Three parts, run in order here: classify (serving_classify.cpp), link
// (serving_link.cpp), verdict (serving_verdict.cpp).
#include "hangscope/analysis/analysis.h"
#include "serving_parts.h"

namespace hangscope::analysis {

std::vector<ServingChain> serving_chains(const model::Bundle& bundle, const std::vector<Job>& jobs,
                                         const std::vector<OtherProcess>& others) {
  auto [apis, engines, coordinators] = serving::classify(bundle, others);
  if (apis.empty() && engines.empty()) return {};
  auto by_job = serving::link(jobs, std::move(engines), apis);
  std::vector<ServingChain> out;
  for (auto& [key, chain] : by_job) {
    chain.coordinators = coordinators;
    chain.framework = serving::serving_framework(chain.api_servers);
    if (const auto* job = serving::find_job(jobs, chain.job);
        job != nullptr && !chain.job.empty()) {
      if (!chain.engines.empty()) {
        serving::awaited_workers(chain.engines.front(), *job, chain);
      } else {
        chain.awaited = job->present;
        chain.awaited_reason = "the API server's ranks";
      }
      chain.roots = serving::follow_to_roots(*job, chain.awaited);
    }
    serving::describe(jobs, chain);
    out.push_back(std::move(chain));
  }
  return out;
}

}  // namespace hangscope::analysis

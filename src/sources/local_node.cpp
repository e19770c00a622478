// This node as a source: sampled in-process by the one sampling loop (capture::capture_series),
// for `diagnose` without agents and `collect --once`.
#include <memory>

#include "hangscope/capture/node_capture.h"
#include "hangscope/capture/sample_series.h"
#include "hangscope/elf/module_cache.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/sources/sources.h"

namespace hangscope::sources {

std::vector<model::NodeSnapshot> sample_local_node(const LocalSampling& sampling,
                                                   const Feedback& feedback) {
  capture::NodeCaptureOptions options;
  options.selection = sampling.selection;
  options.evidence = sampling.evidence;
  options.process.locals = sampling.locals || sampling.evidence.query_store;  // keys: in locals
  options.process.modules = std::make_shared<elf::ModuleCache>();  // shared by the samples
  capture::SeriesPlan plan;
  plan.samples = sampling.samples;
  plan.interval = sampling.interval;
  auto taking = feedback.start("capturing samples", "", static_cast<std::uint64_t>(plan.samples));
  capture::SeriesHooks hooks;
  hooks.wait_until = capture::sleep_until_unix;
  hooks.taken = [&](const model::NodeSnapshot& sample) {
    taking.set_done(static_cast<std::uint64_t>(sample.sample_index + 1));
    feedback.say("local sample " + std::to_string(sample.sample_index + 1) + "/" +
                 std::to_string(plan.samples));
  };
  auto samples = capture::capture_series(options, plan, hooks);  // never cancelled
  std::vector<model::NodeSnapshot> out;
  out.reserve(samples->size());
  // As an agent's answer would be: every string from the targets valid UTF-8.
  for (const auto& sample : *samples) out.push_back(snapshot::as_transmitted(sample));
  return out;
}

model::Bundle from_local_node(const LocalSampling& sampling, const Feedback& feedback) {
  model::Bundle bundle;
  bundle.snapshots = sample_local_node(sampling, feedback);
  bundle.nodes.push_back(
      {bundle.snapshots.front().node_name, std::nullopt, model::NodeState::kOk, "", 0});
  return bundle;
}

}  // namespace hangscope::sources

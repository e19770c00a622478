#include "hangscope/capture/sample_series.h"

#include <algorithm>
#include <memory>
#include <random>
#include <thread>

#include "hangscope/common/clock.h"
#include "wait_probes.h"

namespace hangscope::capture {
namespace {

// The probes of a node's processes between one sample and the next.
class NodeProbes {
 public:
  NodeProbes(const model::NodeSnapshot& sample, const std::shared_ptr<elf::ModuleCache>& modules) {
    for (const auto& record : sample.processes) {
      if (auto probe = ProcessProbe::open(record, modules)) probes_.push_back(std::move(probe));
    }
  }
  bool empty() const { return probes_.empty(); }
  void probe() {
    for (auto& p : probes_) p->probe();
  }
  void attach(model::NodeSnapshot& next) const {
    for (auto& record : next.processes) {
      for (const auto& p : probes_) p->attach(record);
    }
  }

 private:
  std::vector<std::unique_ptr<ProcessProbe>> probes_;
};

// `count` probes between `from` and `until` (unix ns): one at a random moment of each of
// `count` equal slots, so that a loop whose period divides the spacing is not always caught at
// the same point of its step. False when the series must stop.
bool probe_between(NodeProbes& probes, std::int64_t from, std::int64_t until, int count,
                   std::minstd_rand& random, const SeriesHooks& hooks) {
  if (probes.empty() || count <= 0 || until <= from) return true;
  const std::int64_t slot = (until - from) / count;
  if (slot <= 0) return true;
  std::uniform_int_distribution<std::int64_t> within(0, slot - 1);
  std::int64_t rest_until = 0;  // a probe of many processes is followed by as long a pause
  for (int k = 0; k < count; ++k) {
    const std::int64_t at = std::max(from + k * slot + within(random), rest_until);
    if (at >= until) break;  // never past the next sample's moment
    if (!hooks.wait_until(at)) return false;
    const std::int64_t began = unix_now_ns();
    probes.probe();
    const std::int64_t took = unix_now_ns() - began;
    rest_until = unix_now_ns() + took;  // at most half of the node's time goes to probes
  }
  return true;
}

}  // namespace

bool sleep_until_unix(std::int64_t unix_ns) {
  const std::int64_t wait = unix_ns - unix_now_ns();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
  return true;
}

std::optional<std::vector<model::NodeSnapshot>> capture_series(NodeCaptureOptions options,
                                                               const SeriesPlan& plan,
                                                               const SeriesHooks& hooks) {
  if (!options.process.modules) options.process.modules = std::make_shared<elf::ModuleCache>();
  const ExtraEvidence asked = options.evidence;  // dumps and store queries: last sample only
  const auto capture = hooks.capture ? hooks.capture : capture_node;
  const std::int64_t start = plan.start_unix_ns > 0 ? plan.start_unix_ns : unix_now_ns();
  const std::int64_t interval = plan.interval.count();
  std::minstd_rand random(std::random_device{}());
  std::vector<model::NodeSnapshot> samples;
  std::unique_ptr<NodeProbes> probes;  // since the last sample
  for (int i = 0; i < plan.samples; ++i) {
    const std::int64_t due = start + static_cast<std::int64_t>(i) * interval;
    if (probes &&
        !probe_between(*probes, unix_now_ns(), due, plan.probes_per_interval, random, hooks)) {
      return std::nullopt;
    }
    if (!hooks.wait_until(due)) return std::nullopt;
    const bool last = i == plan.samples - 1;
    options.evidence.trigger_flight_dumps = asked.trigger_flight_dumps && last;
    options.evidence.query_store = asked.query_store && last;
    auto sample = capture(options);
    sample.sample_index = i;
    if (probes) probes->attach(sample);
    if (hooks.taken) hooks.taken(sample);
    probes = last ? nullptr : std::make_unique<NodeProbes>(sample, options.process.modules);
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace hangscope::capture

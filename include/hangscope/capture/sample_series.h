// A node's series of samples: stopped captures at fixed moments and, between each two,
// non-stopping probes of the Python threads, so that a wait that is left and entered again
// between samples is told from one that is never left (docs/analysis.md, "Progress evidence").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "hangscope/capture/node_capture.h"
#include "hangscope/model/node_snapshot.h"

namespace hangscope::capture {

// Probes per interval between two samples: enough to catch a step loop outside its wait even
// when it spends most of its time in it.
inline constexpr int kProbesPerInterval = 24;

struct SeriesPlan {
  int samples = 1;
  std::chrono::nanoseconds interval{0};
  std::int64_t start_unix_ns = 0;  // sample i is due at start + i * interval (0: now)
  int probes_per_interval = kProbesPerInterval;
};

struct SeriesHooks {
  // Waits until `unix_ns` (this machine's clock); false when the series must stop (cancelled).
  std::function<bool(std::int64_t unix_ns)> wait_until;
  // Takes one stopped sample (an agent serialises these); capture_node when empty.
  std::function<model::NodeSnapshot(const NodeCaptureOptions&)> capture;
  // Told of each sample once its probes are attached (for progress lines); may be empty.
  std::function<void(const model::NodeSnapshot&)> taken;
};

// The samples, sample_index set, each carrying the probes taken since the one before (the
// threads' ProbeTally); nullopt when wait_until said stop. Processes that appear, exit or are
// not Python get no probes; the samples are taken all the same. The fresh flight-recorder dumps
// and store queries that options.evidence asks for are made on the last sample only.
std::optional<std::vector<model::NodeSnapshot>> capture_series(NodeCaptureOptions options,
                                                               const SeriesPlan& plan,
                                                               const SeriesHooks& hooks);

// Sleeps until `unix_ns`; always true (for callers that cannot be cancelled).
bool sleep_until_unix(std::int64_t unix_ns);

}  // namespace hangscope::capture

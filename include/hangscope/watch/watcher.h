// `hangscope watch` (docs/watch.md): polls every node with the non-stopping observation, tracks
// each job's progress (job_progress.h), confirms a stall with normal samples through the same
// pipeline as diagnose, and keeps each confirmed incident as a bundle (incidents.h), told on
// stdout, to --on-hang and to the metrics endpoint.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/agent/agent.h"
#include "hangscope/capture/node_observer.h"
#include "hangscope/sources/sources.h"
#include "hangscope/watch/metrics.h"

namespace hangscope::watch {

struct WatchOptions {
  std::vector<std::string> agents;  // empty: this node, in-process
  // Credentials for the agents, and the incident capture's samples, interval and locals.
  agent::CollectRequest request;
  sources::LocalSampling local;     // this node's incident capture (no agents)
  capture::ObserveOptions observe;  // this node's observation (its pids, select, node name)
  std::chrono::milliseconds after{5 * 60 * 1000};
  bool after_given = false;  // else half a job's collective timeout when shorter
  std::chrono::milliseconds poll{2000};
  int probes = 8;  // reads per poll between its first and last
  std::string dir = "hangscope-watch";
  std::string on_hang;
  std::chrono::milliseconds on_hang_limit{60'000};
  bool once = false;
  std::optional<std::chrono::milliseconds> timeout;
  std::optional<MetricsOptions> metrics;
  std::size_t keep = 50;
  std::string rules_dir;
  std::size_t max_rule_bytes = 0;
};

// The exit codes of watch (design.md).
inline constexpr int kWatchStopped = 0;      // SIGTERM/SIGINT, or --timeout without incident
inline constexpr int kWatchUnreachable = 1;  // no node could be reached at start
inline constexpr int kWatchIncident = 3;     // --once, after an incident

// Watches until `stop` is set, --timeout passes or (--once) the first incident; returns the exit
// code. Incident lines go to stdout; logs and the status line to `feedback`. Throws
// hangscope::Error when the metrics endpoint cannot listen or the incident directory cannot be
// made.
int watch(const WatchOptions& options, const sources::Feedback& feedback,
          const std::atomic<bool>& stop);

}  // namespace hangscope::watch

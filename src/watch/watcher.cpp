#include "hangscope/watch/watcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/clock.h"
#include "hangscope/common/error.h"
#include "hangscope/common/text.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/rules/rule.h"
#include "hangscope/sources/observations.h"
#include "hangscope/watch/findings.h"
#include "hangscope/watch/incidents.h"
#include "hangscope/watch/job_progress.h"

namespace hangscope::watch {
namespace {

double seconds(std::chrono::nanoseconds d) {
  return static_cast<double>(d.count()) / 1e9;
}

std::string seconds_text(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, s < 10 ? "%.1f s" : "%.0f s", s);
  return buffer;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

class Watcher {
 public:
  Watcher(const WatchOptions& options, const sources::Feedback& feedback,
          const std::atomic<bool>& stop)
      : options_(options),
        feedback_(feedback),
        stop_(stop),
        observations_(options.agents, options.request, options.observe),
        tracker_(options.after, options.after_given),
        rules_(
            rules::load_rules(rules::kSystemRulesDir, options.rules_dir, options.max_rule_bytes)) {
    for (const auto& e : rules_.errors) feedback_.warning("skipped rule: " + e);
    if (options.metrics) metrics_ = std::make_unique<Metrics>(*options.metrics);
    if (metrics_)
      feedback_.say("metrics at http://…:" + std::to_string(metrics_->port()) + "/metrics");
    for (const auto& said : tidy_incidents(options.dir, options.keep)) feedback_.say(said);
  }

  int run() {
    const auto began = std::chrono::steady_clock::now();
    auto status = feedback_.start("watching");
    bool first = true;
    while (!stop_) {
      if (options_.timeout && std::chrono::steady_clock::now() - began >= *options_.timeout) {
        feedback_.say("no incident within --timeout: stopping");
        return kWatchStopped;
      }
      const auto poll_began = std::chrono::steady_clock::now();
      const auto bundle =
          observations_.poll(options_.poll, options_.probes, [&] { return stop_.load(); });
      if (stop_) break;
      const auto unreachable = report_nodes(bundle);
      if (first) {
        first = false;
        if (unreachable.size() == bundle.nodes.size()) {
          feedback_.error("no node could be reached: " + join(unreachable, "; ", 5));
          return kWatchUnreachable;
        }
      }
      const auto polls = read_polls(bundle);
      for (const auto& p : polls) {
        for (const auto& r : p.ranks) {
          spdlog::debug("{} {}: {}{} ({})", p.label, rank_reading_text(r), r.state,
                        r.where.empty() ? "" : " at " + r.where, r.evidence);
        }
      }
      const auto events = tracker_.update(polls);
      const auto took = std::chrono::steady_clock::now() - poll_began;
      if (metrics_) metrics_->polled(unix_now_ns(), seconds(took));
      show(status, bundle.nodes.size(), unreachable.size());
      std::optional<model::Bundle> capture;  // one capture serves every event of this poll
      std::optional<analysis::Analysis> analysis;
      for (const auto& e : events) {
        if (stop_) break;
        if (!capture) {
          capture = capture_now();
          analysis = diagnosis::diagnose(*capture, rules_);
        }
        if (handle(e, *capture, *analysis) && options_.once) return kWatchIncident;
      }
    }
    feedback_.say("stopped by a signal");
    return kWatchStopped;
  }

 private:
  // Each node's state into the log (when it changes) and the metrics; the nodes not ok.
  std::vector<std::string> report_nodes(const model::Bundle& bundle) {
    std::vector<std::string> bad;
    std::map<std::string, bool> unreachable;
    for (const auto& n : bundle.nodes) {
      const bool down = n.status != model::NodeState::kOk;
      unreachable[n.name] = down;
      if (down)
        bad.push_back(n.name + " (" + std::string(model::to_string(n.status)) + ": " + n.error +
                      ")");
      const auto before = node_states_.find(n.name);
      if (before == node_states_.end() ? down : before->second != n.status) {
        if (down) {
          feedback_.warning(n.name + ": " + std::string(model::to_string(n.status)) +
                            (n.error.empty() ? "" : " (" + n.error + ")"));
        } else {
          feedback_.say(n.name + ": answering again");
        }
      }
      node_states_[n.name] = n.status;
    }
    if (metrics_) metrics_->set_nodes(unreachable);
    return bad;
  }

  void show(ProgressMeter::Task& status, std::size_t nodes, std::size_t unreachable) {
    const auto readings = tracker_.readings(unix_now_ns());
    std::vector<JobReading> jobs;
    std::vector<std::string> parts;
    for (const auto& r : readings) {
      jobs.push_back({r.job, r.seconds_stalled, r.waiting, r.progressing});
      std::string part = r.label + ": " + std::to_string(r.alive) + " rank(s)";
      if (r.incident_open) {
        part += ", incident kept";
      } else if (r.waiting > 0 && r.seconds_stalled > 0) {
        part += ", " + std::to_string(r.waiting) + " waiting, no progress for " +
                seconds_text(r.seconds_stalled);
      } else if (r.progressing > 0) {
        part += ", progressing";
      } else {
        part += ", none waiting on peers";
      }
      parts.push_back(part);
    }
    if (metrics_) metrics_->set_jobs(jobs);
    std::string line =
        std::to_string(readings.size()) + " job(s) on " + std::to_string(nodes) + " node(s)";
    if (unreachable > 0) line += " (" + std::to_string(unreachable) + " unreachable)";
    if (!parts.empty()) line += ": " + join(parts, "; ", 3);
    status.stage(line);
    spdlog::debug("poll: {}", line);
  }

  // The confirming capture: the same samples diagnose takes, from the same nodes.
  model::Bundle capture_now() {
    const auto began = std::chrono::steady_clock::now();
    model::Bundle bundle;
    if (options_.agents.empty()) {
      bundle = sources::from_local_node(options_.local, feedback_);
    } else {
      bundle = sources::from_agents(options_.agents, options_.request, feedback_);
    }
    if (metrics_) metrics_->captured(seconds(std::chrono::steady_clock::now() - began));
    return bundle;
  }

  // One event: an incident written (true), or a suspicion the samples cleared (false).
  bool handle(const JobEvent& e, const model::Bundle& capture, const analysis::Analysis& found) {
    Incident incident;
    incident.label = e.label;
    incident.detected_unix_ns = unix_now_ns();
    incident.after_seconds = seconds(options_.after);
    incident.poll_seconds = seconds(options_.poll);
    incident.finding = finding_of(e, found);
    if (e.kind == JobEvent::Kind::kSuspect) {
      incident.stalled_since_unix_ns = e.stalled_since_ns;
      if (verdict_for(found, e.job) == nullptr) {
        feedback_.say(
            e.label + ": " + std::to_string(e.waiting.size()) +
            " rank(s) waited with no collective completed for " +
            seconds_text(static_cast<double>(incident.detected_unix_ns - e.stalled_since_ns) /
                         1e9) +
            ", but the samples show no hang (" + first_line(found.conclusion) +
            "): checked again after twice as long");
        tracker_.cleared(e.job);
        if (metrics_) metrics_->count_cleared();
        return false;
      }
    }
    analysis::Analysis analysis = found;
    if (const auto* lead = apply_finding(analysis, incident.finding)) {
      incident.verdict = lead->id;
      incident.summary = lead->summary;
    }
    const auto* history = tracker_.history(e.job);
    std::string path;
    try {
      path = write_incident(options_.dir, incident, capture, analysis,
                            history ? *history : std::deque<JobPoll>{});
    } catch (const Error& ex) {
      feedback_.error(std::string("incident of ") + e.label + " not written: " + ex.what());
      tracker_.incident(e.job);  // not retried in a loop: the next one after progress
      return false;
    }
    tracker_.incident(e.job);
    if (metrics_) metrics_->count_incident(to_string(incident.finding.kind));
    std::cout << utc_iso(incident.detected_unix_ns) << " incident " << printable(e.job) << " "
              << incident.verdict << " " << printable(path) << ": "
              << printable(first_line(incident.summary)) << std::endl;
    for (const auto& said : tidy_incidents(options_.dir, options_.keep)) feedback_.say(said);
    if (!options_.on_hang.empty()) {
      const auto hook = run_on_hang(options_.on_hang, path, incident, options_.on_hang_limit);
      if (!hook.output.empty()) feedback_.say("--on-hang output:\n" + printable(hook.output));
      if (hook.ok) {
        feedback_.say("--on-hang: " + hook.ended);
      } else {
        feedback_.warning("--on-hang failed: " + hook.ended);
      }
    }
    return true;
  }

  const WatchOptions& options_;
  const sources::Feedback& feedback_;
  const std::atomic<bool>& stop_;
  sources::Observations observations_;
  JobTracker tracker_;
  rules::RuleSet rules_;
  std::unique_ptr<Metrics> metrics_;
  std::map<std::string, model::NodeState> node_states_;
};

}  // namespace

int watch(const WatchOptions& options, const sources::Feedback& feedback,
          const std::atomic<bool>& stop) {
  Watcher watcher(options, feedback, stop);
  return watcher.run();
}

}  // namespace hangscope::watch

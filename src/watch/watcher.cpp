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

// Whether a verdict is about `job`: its own, or one that spans it.
bool about_job(const analysis::Verdict& v, const std::string& job) {
  if (v.job == job || std::find(v.jobs.begin(), v.jobs.end(), job) != v.jobs.end()) return true;
  return std::any_of(v.processes.begin(), v.processes.end(),
                     [&](const auto& p) { return p.job == job || p.group == job; });
}

// The first verdict (they are ordered) about `job`.
const analysis::Verdict* verdict_for(const analysis::Analysis& analysis, const std::string& job) {
  for (const auto& v : analysis.verdicts) {
    if (about_job(v, job)) return &v;
  }
  return nullptr;
}

// The capture holds every job of the nodes, and another job hung meanwhile may have the verdict
// of higher confidence: the incident's report leads with its own job's verdicts (its top
// verdict, the culprit, is this job's), the others after them in their order.
void lead_with_job(analysis::Analysis& analysis, const std::string& job) {
  std::stable_partition(analysis.verdicts.begin(), analysis.verdicts.end(),
                        [&](const analysis::Verdict& v) { return about_job(v, job); });
  if (!analysis.verdicts.empty()) analysis.conclusion = analysis.verdicts.front().summary;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

std::string rank_text(const RankReading& r) {
  return (r.rank ? "rank " + std::to_string(*r.rank) : std::string("a process")) + " (" + r.node +
         " pid " + std::to_string(r.pid) + ")";
}

std::string ranks_text(const std::vector<RankReading>& ranks) {
  std::vector<std::string> parts;
  for (const auto& r : ranks) parts.push_back(rank_text(r));
  return join(parts, ", ", 6);
}

// The verdict watch itself makes when a rank exited while its peers waited: the capture taken
// afterwards no longer holds that rank, so the analysis cannot see it die.
// Where the waiting ranks wait, as the confirming capture (native stacks too) shows it: a store
// wait called from user code has no Python frame of its own for the observations to name.
std::string where_they_wait(const JobEvent& e, const analysis::Analysis& analysis) {
  for (const auto& job : analysis.jobs) {
    if (job.key != e.job) continue;
    for (const auto& w : e.waiting) {
      for (const auto& entry : job.ranks) {
        if (entry.node == w.node && entry.pid == w.pid && !entry.wait.primitive.empty()) {
          return entry.wait.describe();
        }
      }
    }
  }
  for (const auto& w : e.waiting) {
    if (!w.where.empty()) return w.where;
  }
  return "";
}

analysis::Verdict rank_dead_verdict(const JobEvent& e, const std::string& where_waiting) {
  analysis::Verdict v;
  v.id = analysis::verdict_ids::kRankDead;
  v.kind = analysis::VerdictKind::kGeneric;
  v.title = "A rank exited while its peers wait";
  v.confidence = 0.9;
  v.job = e.job;
  if (e.dead.rank) v.diverged_ranks.insert(*e.dead.rank);
  for (const auto& w : e.waiting) {
    if (w.rank) v.waiting_ranks.insert(*w.rank);
  }
  const std::string how = e.dead.exit.empty() ? "exited" : "exited (" + e.dead.exit + ")";
  const std::string where = where_waiting.empty() ? "" : " in " + where_waiting;
  v.summary = "Rank " + (e.dead.rank ? std::to_string(*e.dead.rank) : std::string("?")) + " (" +
              e.dead.node + " pid " + std::to_string(e.dead.pid) + ") " + how + " while " +
              ranks_text(e.waiting) + " waited" + where + "; they wait for it until their timeout.";
  v.evidence.push_back(
      "watch saw " + rank_text(e.dead) + " in one poll and gone (" +
      (e.dead.exit.empty() ? "its exit status was not seen: it was reaped" : e.dead.exit) +
      ") in the next, while its peers stood in their wait with no collective "
      "completed (watch.json holds every poll)");
  if (!e.dead.where.empty()) v.evidence.push_back("its last stack: " + e.dead.where);
  v.remedies.push_back(
      "find why the process exited: its log's last lines, the kernel log (`dmesg`: OOM killer, "
      "segfault), the launcher's log");
  v.processes.push_back(
      {e.dead.node, e.dead.pid, "rank", e.job, e.dead.rank, "", std::nullopt, "diverged"});
  for (const auto& w : e.waiting) {
    if (v.processes.size() >= 16) break;
    v.processes.push_back({w.node, w.pid, "rank", e.job, w.rank, "", std::nullopt, "waiting"});
  }
  return v;
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
          spdlog::debug("{} {}: {}{} ({})", p.label, rank_text(r), r.state,
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
    incident.job = e.job;
    incident.label = e.label;
    incident.detected_unix_ns = unix_now_ns();
    incident.after_seconds = seconds(options_.after);
    incident.poll_seconds = seconds(options_.poll);
    analysis::Analysis analysis = found;
    if (e.kind == JobEvent::Kind::kRankDead) {
      incident.kind = "rank-dead";
      auto verdict = rank_dead_verdict(e, where_they_wait(e, found));
      analysis.verdicts.insert(analysis.verdicts.begin(), verdict);
      analysis.conclusion = verdict.summary;
      incident.verdict = verdict.id;
      incident.summary = verdict.summary;
    } else {
      incident.kind = "hang";
      incident.stalled_since_unix_ns = e.stalled_since_ns;
      const auto* verdict = verdict_for(analysis, e.job);
      if (verdict == nullptr) {
        feedback_.say(
            e.label + ": " + std::to_string(e.waiting.size()) +
            " rank(s) waited with no collective completed for " +
            seconds_text(static_cast<double>(incident.detected_unix_ns - e.stalled_since_ns) /
                         1e9) +
            ", but the samples show no hang (" + first_line(analysis.conclusion) +
            "): checked again after twice as long");
        tracker_.cleared(e.job);
        if (metrics_) metrics_->count_cleared();
        return false;
      }
      incident.verdict = verdict->id;
      incident.summary = verdict->summary;
      lead_with_job(analysis, e.job);
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
    if (metrics_) metrics_->count_incident(incident.kind);
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

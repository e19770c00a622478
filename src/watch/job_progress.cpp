#include "hangscope/watch/job_progress.h"

#include <algorithm>

#include "hangscope/analysis/analysis.h"
#include "hangscope/capture/node_observer.h"
#include "hangscope/waits/frameworks.h"
#include "hangscope/waits/wait_point.h"

namespace hangscope::watch {
namespace {

// A wait that stands for a collective the job has not completed. A reader of vLLM's broadcast
// ring waits for the next request as much as for a peer (an idle server), so a ring counts only
// when its writer cannot write (a reader stopped reading).
bool waits_for_collective(const waits::WaitPoint& wait, const model::ProcessRecord* process) {
  switch (wait.kind) {
    case waits::WaitKind::kCollective:
    case waits::WaitKind::kStore:
    case waits::WaitKind::kRendezvous:
    case waits::WaitKind::kChannel:
      return true;
    case waits::WaitKind::kRing:
      if (process == nullptr || !process->dump) return false;
      return std::any_of(process->dump->threads.begin(), process->dump->threads.end(),
                         [](const model::ThreadDump& t) {
                           return waits::find_meaning(t.frames, waits::FrameMeaning::kRingWrite) !=
                                  nullptr;
                         });
    default:
      return false;
  }
}

// The highest sequence number among a sample's groups (collectives issued), when read.
std::optional<std::uint64_t> highest_sequence(const model::ProcessRecord* process) {
  if (process == nullptr || !process->dump || !process->dump->distributed) return std::nullopt;
  std::optional<std::uint64_t> highest;
  for (const auto& g : process->dump->distributed->groups) {
    if (g.sequence && (!highest || *g.sequence > *highest)) highest = g.sequence;
  }
  return highest;
}

// Whether any group's sequence number grew from `before` to `after` (same group name).
bool sequence_advanced(const model::ProcessRecord* before, const model::ProcessRecord* after) {
  if (before == nullptr || after == nullptr || !before->dump || !after->dump ||
      !before->dump->distributed || !after->dump->distributed) {
    return false;
  }
  for (const auto& g : after->dump->distributed->groups) {
    if (!g.sequence) continue;
    for (const auto& h : before->dump->distributed->groups) {
      if (h.name == g.name && h.sequence && *g.sequence > *h.sequence) return true;
    }
  }
  return false;
}

// Rank readings a job's history keeps at most (watch.json's observations).
constexpr std::size_t kHistoryReadings = 200'000;

// Polls after a rank exited within which its peers must stand still for a rank-dead incident.
constexpr int kDeadPolls = 3;

bool exited(const analysis::RankEntry& entry) {
  const auto* latest = entry.latest();
  return entry.state == analysis::RankState::kDead ||
         (latest != nullptr && (latest->state == 'Z' || latest->state == 'X'));
}

RankReading read_rank(const analysis::RankEntry& entry) {
  RankReading r;
  r.node = entry.node;
  r.pid = entry.pid;
  r.rank = entry.rank;
  const auto* first = entry.history.front();
  const auto* latest = entry.latest();
  r.sequence = highest_sequence(latest);
  if (!entry.wait.primitive.empty()) r.where = entry.wait.describe();
  r.evidence = entry.progress.detail;
  if (exited(entry)) {
    r.state = "exited";
    if (const auto it = latest->facts.find(capture::kProcessExitFact); it != latest->facts.end()) {
      r.exit = it->second;
    }
    return r;
  }
  const auto before = first->dump ? waits::process_wait_point(*first->dump) : waits::WaitPoint{};
  const bool waited_before = waits_for_collective(before, first);
  const bool left_wait =
      waited_before && entry.history.size() > 1 &&
      (entry.progress.progressing == true || entry.wait.operation_key() != before.operation_key());
  r.still = entry.history.size() > 1 && !entry.progress.cpu_grew && !entry.progress.stack_moved &&
            entry.progress.progressing != true;
  if (sequence_advanced(first, latest) || left_wait) {
    r.still = false;
    r.state = "progressing";
  } else if (waits_for_collective(entry.wait, latest)) {
    const bool undecided = !entry.progress.progressing && !entry.progress.undecided.empty();
    r.state = undecided ? "undecided" : "waiting";
  } else {
    r.state = "working";
  }
  return r;
}

std::string label_of(const analysis::Job& job) {
  const std::string key = job.key.empty() ? "(no job key)" : job.key;
  if (job.group) {
    // "DP rank" names a member of a data-parallel group: "DP group KEY"; else "group KEY".
    const std::string noun = job.group->noun();
    return (noun == "group rank" ? std::string("group ")
                                 : noun.substr(0, noun.find(' ')) + " group ") +
           key;
  }
  return "job " + key;
}

}  // namespace

int JobPoll::waiting() const {
  return static_cast<int>(std::count_if(ranks.begin(), ranks.end(),
                                        [](const RankReading& r) { return r.state == "waiting"; }));
}

int JobPoll::progressing() const {
  return static_cast<int>(std::count_if(
      ranks.begin(), ranks.end(), [](const RankReading& r) { return r.state == "progressing"; }));
}

int JobPoll::alive() const {
  return static_cast<int>(std::count_if(ranks.begin(), ranks.end(),
                                        [](const RankReading& r) { return r.state != "exited"; }));
}

std::vector<JobPoll> read_polls(const model::Bundle& bundle) {
  std::vector<JobPoll> out;
  for (const auto& job : analysis::build_jobs(bundle)) {
    JobPoll poll;
    poll.job = job.key;
    poll.label = label_of(job);
    for (const auto& entry : job.ranks) {
      if (entry.history.empty()) continue;
      const auto& times = entry.sample_times_ns;
      if (!times.empty()) {
        const std::int64_t start = times.size() >= 2 ? times[times.size() - 2] : times.back();
        if (poll.unix_ns == 0 || start < poll.unix_ns) poll.unix_ns = start;
        poll.until_unix_ns = std::max(poll.until_unix_ns, times.back());
      }
      poll.ranks.push_back(read_rank(entry));
      if (const auto* latest = entry.latest();
          latest && latest->dump && latest->dump->distributed) {
        for (const auto& g : latest->dump->distributed->groups) {
          if (g.timeout_ms && (!poll.timeout_ms || *g.timeout_ms < *poll.timeout_ms)) {
            poll.timeout_ms = g.timeout_ms;
          }
        }
      }
    }
    if (poll.alive() == 0 && poll.ranks.empty()) continue;
    poll.progressed = poll.progressing() > 0;
    out.push_back(std::move(poll));
  }
  return out;
}

JobTracker::JobTracker(std::chrono::nanoseconds after, bool after_given, std::size_t history)
    : after_(after), after_given_(after_given), history_size_(std::max<std::size_t>(history, 1)) {}

std::vector<JobEvent> JobTracker::update(const std::vector<JobPoll>& polls) {
  std::vector<JobEvent> events;
  std::set<std::string> present;
  for (const auto& poll : polls) {
    if (poll.alive() == 0) continue;  // every rank exited: the job ended
    present.insert(poll.job);
    auto [it, fresh] = jobs_.try_emplace(poll.job);
    State& s = it->second;
    if (fresh) s.after = s.required = after_;
    if (!after_given_ && poll.timeout_ms) {
      // Half the job's own collective timeout, when shorter: the evidence is kept before the
      // watchdog's timeout tears the job down.
      const auto half = std::chrono::milliseconds(*poll.timeout_ms / 2);
      const std::chrono::nanoseconds own = std::min<std::chrono::nanoseconds>(after_, half);
      if (own != s.after) {
        if (s.required == s.after) s.required = own;
        s.after = own;
      }
    }
    s.label = poll.label;
    s.history.push_back(poll);
    // The polls kept hold at most kHistoryReadings rank readings: a job of 100,000 ranks keeps
    // its last two polls, one of 8 ranks the last history_size_.
    const std::size_t kept = std::clamp<std::size_t>(
        kHistoryReadings / std::max<std::size_t>(poll.ranks.size(), 1), 2, history_size_);
    while (s.history.size() > kept) s.history.pop_front();
    std::vector<RankReading> waiting;  // on peers, or standing still
    for (const auto& r : poll.ranks) {
      if (r.state == "waiting" || (r.state != "exited" && r.still)) waiting.push_back(r);
    }
    // A rank that exited is told once its peers stand still in a later poll (they do not move
    // on without it): a job that ends has its ranks leave within moments of each other, and a
    // rank that finished early leaves peers that go on working.
    bool told = false;
    for (auto& [dead, age] : s.dead_pending) {
      ++age;
      if (told || waiting.empty() || poll.progressed || s.incident_open) continue;
      JobEvent e;
      e.kind = JobEvent::Kind::kRankDead;
      e.job = poll.job;
      e.label = poll.label;
      e.dead = dead;
      e.waiting = waiting;
      events.push_back(std::move(e));
      told = true;  // one incident for the ranks that exited together
    }
    std::erase_if(s.dead_pending, [&](const auto& p) { return told || p.second >= kDeadPolls; });
    for (const auto& r : poll.ranks) {
      if (r.state != "exited" || !s.dead_told.insert({r.node, r.pid}).second) continue;
      if (!s.incident_open) s.dead_pending.push_back({r, 0});
    }
    waiting.clear();
    for (const auto& r : poll.ranks) {
      if (r.state == "waiting") waiting.push_back(r);
    }
    if (poll.progressed) {
      s.stalled_since.reset();
      s.incident_open = false;
      s.required = s.after;
    } else if (waiting.empty()) {
      s.stalled_since.reset();
    } else if (!s.stalled_since) {
      s.stalled_since = poll.unix_ns;
    }
    if (s.stalled_since && !s.incident_open &&
        poll.until_unix_ns - *s.stalled_since >= s.required.count()) {
      JobEvent e;
      e.kind = JobEvent::Kind::kSuspect;
      e.job = poll.job;
      e.label = poll.label;
      e.stalled_since_ns = *s.stalled_since;
      e.waiting = waiting;
      events.push_back(std::move(e));
    }
  }
  std::erase_if(jobs_, [&](const auto& entry) { return !present.count(entry.first); });
  return events;
}

void JobTracker::incident(const std::string& job) {
  if (auto it = jobs_.find(job); it != jobs_.end()) it->second.incident_open = true;
}

void JobTracker::cleared(const std::string& job) {
  if (auto it = jobs_.find(job); it != jobs_.end()) it->second.required *= 2;
}

std::vector<JobTracker::Reading> JobTracker::readings(std::int64_t now_ns) const {
  std::vector<Reading> out;
  for (const auto& [key, s] : jobs_) {
    Reading r;
    r.job = key;
    r.label = s.label;
    r.incident_open = s.incident_open;
    if (s.stalled_since) r.seconds_stalled = static_cast<double>(now_ns - *s.stalled_since) / 1e9;
    if (!s.history.empty()) {
      r.waiting = s.history.back().waiting();
      r.progressing = s.history.back().progressing();
      r.alive = s.history.back().alive();
    }
    out.push_back(std::move(r));
  }
  return out;
}

const std::deque<JobPoll>* JobTracker::history(const std::string& job) const {
  const auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second.history;
}

}  // namespace hangscope::watch

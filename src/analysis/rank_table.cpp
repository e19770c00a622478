// The rank table of each job: ranks matched across samples, their state, wait point, progress
// and "stuck since", plus the ranks a known world size says are missing.
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <regex>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "hangscope/analysis/analysis.h"
#include "hangscope/common/text.h"
#include "hangscope/model/group_identity.h"

namespace hangscope::analysis {
namespace {

// One process in one job: its own torch job, or a group outside the registry it holds.
struct ProcessKey {
  std::string node;
  pid_t pid;
  std::uint64_t start;
  std::string group;  // the group's store key; "" for the process's own job
  auto operator<=>(const ProcessKey&) const = default;
};

// The groups outside torch's registry that a process holds, known by their store, with its
// rank in each and their sizes.
struct HeldGroup {
  std::string key;
  std::string name;  // the group's name in the process
  int group_rank = 0;
  int size = 0;
  Job::Group what;
};
std::vector<HeldGroup> groups_outside_registry(const model::ProcessRecord& p,
                                               const std::string& node,
                                               const model::AddressBook& book) {
  std::vector<HeldGroup> out;
  if (!p.dump || !p.dump->distributed) return out;
  for (const auto& g : p.dump->distributed->groups) {
    if (g.registered || !g.group_rank) continue;
    auto key = model::group_store_key(g, node, p, book);
    if (key.empty()) continue;
    if (std::any_of(out.begin(), out.end(), [&](const HeldGroup& h) { return h.key == key; })) {
      continue;
    }
    out.push_back({std::move(key), g.name, *g.group_rank, g.size, {g.type, g.held_by}});
  }
  return out;
}

RankState state_from_letter(char letter) {
  switch (letter) {
    case 'R':
      return RankState::kRunning;
    case 'S':
    case 'I':
      return RankState::kWaiting;
    case 'T':
    case 't':
      return RankState::kStopped;
    case 'D':
      return RankState::kUninterruptible;
    case 'Z':
    case 'X':
      return RankState::kDead;
    default:
      return RankState::kUnknown;
  }
}

const model::ThreadDump* find_thread(const model::ProcessRecord& process, pid_t tid) {
  if (!process.dump) return nullptr;
  for (const auto& t : process.dump->threads) {
    if (t.tid == tid) return &t;
  }
  return nullptr;
}

// Waits that spin instead of blocking (vLLM's broadcast ring polls its flags with
// sched_yield): the thread runs and its line and locals change inside the loop, which is not
// progress; only leaving the loop (other functions on the stack) is.
// The same holds for the waits that poll: store waits and rendezvous (the store-based barrier's
// loop of store.add and sleep, the TCPStore server waiting for workers).
bool spins(const waits::WaitPoint& wait) {
  return wait.kind == waits::WaitKind::kRing || wait.kind == waits::WaitKind::kStore ||
         wait.kind == waits::WaitKind::kRendezvous;
}

// What identifies "the same place" for the progress check: Python frames with lines and
// locals (a loop counter or a fresh Work object is progress), else native function names.
// For a spin wait (`spin_primitive`): the function names from the spinning function outward,
// since inside the loop the thread is anywhere (a yield, a timer, the flag check).
std::string stack_signature(const model::ThreadDump* thread, const std::string& spin_primitive) {
  if (thread == nullptr) return "<gone>";
  std::string out;
  if (!thread->python_frames.empty()) {
    const auto& frames = thread->python_frames;
    if (!spin_primitive.empty()) {
      const auto from = std::find_if(frames.begin(), frames.end(),
                                     [&](const auto& f) { return f.function == spin_primitive; });
      for (auto f = from; f != frames.end(); ++f) out += f->file + ":" + f->function + ";";
      if (from != frames.end()) return out;
    }
    for (const auto& f : frames) {
      out += f.file + ":" + f.function + ":" + std::to_string(f.line);
      for (const auto& [name, value] : f.locals) out += "," + name + "=" + value;
      out += ";";
    }
    return out;
  }
  for (const auto& f : thread->native_frames) out += f.function + ";";
  return out;
}

std::uint64_t cpu_ticks(const model::ProcessRecord& p) {
  return p.utime_ticks + p.stime_ticks;
}

// The depth (0: outermost) of the Python frame `thread` waits in; nullopt when the wait has no
// Python frame on its stack.
std::optional<std::size_t> wait_depth(const model::ThreadDump* thread,
                                      const waits::WaitPoint& wait) {
  if (thread == nullptr || !wait.python) return std::nullopt;
  const auto& frames = thread->python_frames;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const auto& f = frames[i];
    if (f.function == wait.python->function && f.file == wait.python->file &&
        f.line == wait.python->line) {
      return frames.size() - 1 - i;
    }
  }
  return std::nullopt;
}

// The probes between the samples of the rank's waiting thread, and those that found it
// outside the frame it waits in (each sample's probes compare with the sample before it).
void count_probes(const RankEntry& entry, Progress& progress) {
  const auto& h = entry.history;
  const auto depth = wait_depth(find_thread(*h.back(), entry.wait.tid), entry.wait);
  if (!depth) return;
  for (std::size_t i = 1; i < h.size(); ++i) {
    const auto* thread = find_thread(*h[i], entry.wait.tid);
    if (thread == nullptr || !thread->probes) continue;
    progress.probes += thread->probes->taken;
    progress.probes_outside += thread->probes->outside(*depth);
  }
}

// The awaited group's sequence number (collectives issued on it) in the first and last sample,
// for a rank in a collective. Otherwise, or when that group is not known, any group whose number
// advanced stands for it (a rank that issued a collective somewhere left the wait it stood in);
// when none advanced, that is evidence only for a collective (point-to-point operations do not
// count on torch 1.13's sequence numbers): sequence_group is then "" ("no group's advanced").
void read_sequences(const RankEntry& entry, Progress& progress) {
  const auto* first = entry.history.front();
  const auto* last = entry.history.back();
  if (!first->dump || !first->dump->distributed || !last->dump || !last->dump->distributed) return;
  const auto& before = *first->dump->distributed;
  const auto& after = *last->dump->distributed;
  const auto numbers = [&](const model::ProcessGroupState& group)
      -> std::optional<std::pair<std::uint64_t, std::uint64_t>> {
    const auto* earlier = before.find(group.name);
    if (earlier == nullptr || !earlier->sequence || !group.sequence) return std::nullopt;
    return std::make_pair(*earlier->sequence, *group.sequence);
  };
  const bool collective = entry.wait.kind == waits::WaitKind::kCollective;
  if (const auto* group = collective ? awaited_group(entry) : nullptr) {
    if (const auto n = numbers(*group)) {
      progress.sequence_group = group->name;
      std::tie(progress.sequence_first, progress.sequence_last) = *n;
    }
    return;
  }
  bool any = false;
  for (const auto& group : after.groups) {
    const auto n = numbers(group);
    if (!n) continue;
    any = true;
    if (n->first != n->second) {
      progress.sequence_group = group.name;
      std::tie(progress.sequence_first, progress.sequence_last) = *n;
      return;
    }
  }
  if (any && collective) progress.sequence_first = progress.sequence_last = 0;
}

std::string progress_text(const Progress& p, bool peer_wait, std::size_t samples,
                          double cpu_share) {
  char share_text[32];
  std::snprintf(share_text, sizeof share_text, "%.0f%%", cpu_share * 100);
  std::string out = p.cpu_grew ? "CPU " + std::string(share_text) : "no CPU";
  out += p.woke_up ? ", " + std::to_string(p.wakeups) + " wake-ups" : ", no wake-ups";
  out += p.stack_moved ? ", stack moved" : ", same stack";
  if (p.state_changed) out += ", state changed";
  out += " over " + std::to_string(samples) + " samples";
  if (p.probes > 0) {
    out += p.probes_outside > 0 ? "; left its wait in " + std::to_string(p.probes_outside) +
                                      " of " + std::to_string(p.probes) + " probes"
                                : "; in its wait at all " + std::to_string(p.probes) + " probes";
  }
  if (p.sequence_last && p.sequence_group.empty()) {
    out += "; no process group's sequence number advanced";
  } else if (p.sequence_last) {
    const auto advanced = *p.sequence_last - *p.sequence_first;
    out += "; process group " + p.sequence_group + " sequence number " +
           (advanced != 0 ? "advanced by " + std::to_string(advanced)
                          : "unchanged at " + std::to_string(*p.sequence_last));
  } else if (peer_wait) {
    out += "; no sequence number read";
  }
  if (!p.undecided.empty()) out += "; undecided: " + p.undecided;
  return out;
}

// Progress from the evidence of the samples (docs/analysis.md, "Progress evidence"): a rank
// waits only when nothing shows it completing its wait — its stack moved between samples, a
// probe found it outside the frame it waits in, or its group's sequence number advanced. CPU
// time is work for a rank that waits on nothing; inside a wait it is no evidence either way
// (NCCL and spin waits burn CPU while stuck).
Progress measure_progress(const RankEntry& entry) {
  Progress progress;
  const auto& h = entry.history;
  if (h.size() < 2) {
    progress.detail = h.empty() ? "not captured" : "one sample: progress unknown";
    return progress;
  }
  const auto& first = *h.front();
  const auto& last = *h.back();
  progress.seconds =
      static_cast<double>(entry.sample_times_ns.back() - entry.sample_times_ns.front()) / 1e9;
  progress.cpu_ticks = cpu_ticks(last) >= cpu_ticks(first) ? cpu_ticks(last) - cpu_ticks(first) : 0;
  const double ticks_per_second = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double share = progress.seconds > 0 ? static_cast<double>(progress.cpu_ticks) /
                                                  (progress.seconds * ticks_per_second)
                                            : 0.0;
  progress.cpu_grew = progress.cpu_ticks >= 2 && share >= 0.02;
  // Wake-ups of the rank's thread: a thread blocked for good does not wake up, except for the
  // stop and resume of each capture (a few switches per sample).
  const auto* first_thread = find_thread(first, entry.wait.tid);
  const auto* last_thread = find_thread(last, entry.wait.tid);
  if (first_thread && last_thread &&
      last_thread->context_switches >= first_thread->context_switches) {
    progress.wakeups = last_thread->context_switches - first_thread->context_switches;
  }
  const std::uint64_t capture_switches = 4 * (h.size() - 1);
  progress.woke_up = progress.wakeups > capture_switches + 4;
  const bool spin = spins(entry.wait);
  // The anchor of a spin wait's stack: the Python function it waits in (a native primitive such
  // as sched_yield stands on no Python frame).
  const std::string spin_primitive = !spin               ? ""
                                     : entry.wait.python ? entry.wait.python->function
                                                         : entry.wait.primitive;
  const std::string reference = stack_signature(first_thread, spin_primitive);
  for (std::size_t i = 1; i < h.size(); ++i) {
    if (stack_signature(find_thread(*h[i], entry.wait.tid), spin_primitive) != reference)
      progress.stack_moved = true;
    if (h[i]->state != first.state) progress.state_changed = true;
  }
  count_probes(entry, progress);
  read_sequences(entry, progress);
  const bool peer_wait = waits::waits_on_peers(entry.wait.kind);
  const bool sequence_advanced =
      progress.sequence_last && *progress.sequence_last != *progress.sequence_first;
  if (progress.stack_moved || progress.probes_outside > 0 || sequence_advanced) {
    progress.progressing = true;
  } else if (!peer_wait) {
    // No wait on peers: CPU time is its work. Wake-ups alone are none: a known wait that polls
    // (an idle event loop, a sleep loop) wakes up all the time and stays where it is.
    progress.progressing = progress.cpu_grew;  // (every spin wait is a wait on peers)
  } else if (!spin && progress.cpu_grew && !progress.sequence_last) {
    // On CPU inside a collective or a receive at every look: a loop with no pause that the
    // probes never caught outside, or a wait that spins (NCCL). Only a sequence number tells.
    progress.undecided =
        "on CPU inside " +
        (entry.wait.operation.empty() ? entry.wait.primitive : entry.wait.operation) +
        " at every sample" + (progress.probes > 0 ? " and probe" : "") +
        ", and no sequence number was read to tell a loop with no pause from a wait that spins";
  } else {
    // A polling wait (store, rendezvous, ring) stays a wait however much it wakes or spins.
    progress.progressing = false;
  }
  progress.detail = progress_text(progress, peer_wait, h.size(), share);
  return progress;
}

// A timestamp at the start of a log line: ISO-like "2026-11-29 17:31:56" or vLLM's
// "INFO 11-29 17:31:56" (year taken from the reference time). Node clock, UTC.
std::optional<std::int64_t> log_time_ns(const std::string& line, std::int64_t reference_ns) {
  static const std::regex iso(R"((\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2}))");
  static const std::regex vllm(R"(^[A-Z]+ (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}))");
  std::smatch m;
  std::tm tm{};
  const auto head = line.substr(0, 64);
  if (std::regex_search(head, m, iso)) {
    tm.tm_year = std::stoi(m[1]) - 1900;
    tm.tm_mon = std::stoi(m[2]) - 1;
    tm.tm_mday = std::stoi(m[3]);
    tm.tm_hour = std::stoi(m[4]);
    tm.tm_min = std::stoi(m[5]);
    tm.tm_sec = std::stoi(m[6]);
  } else if (std::regex_search(head, m, vllm)) {
    const std::time_t reference = static_cast<std::time_t>(reference_ns / 1000000000);
    std::tm now{};
    gmtime_r(&reference, &now);
    tm.tm_year = now.tm_year;
    tm.tm_mon = std::stoi(m[1]) - 1;
    tm.tm_mday = std::stoi(m[2]);
    tm.tm_hour = std::stoi(m[3]);
    tm.tm_min = std::stoi(m[4]);
    tm.tm_sec = std::stoi(m[5]);
  } else {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(timegm(&tm)) * 1000000000;
}

void estimate_stuck_since(RankEntry& entry, std::int64_t offset_ns) {
  if (entry.progress.progressing.value_or(true) || entry.history.empty()) return;
  const auto first_sample = entry.sample_times_ns.front();
  std::optional<std::int64_t> last_log;
  for (const auto& log : entry.latest()->logs) {
    for (const auto& line : log.lines) {
      if (auto t = log_time_ns(line, first_sample)) {
        last_log = std::max(last_log.value_or(*t), *t);
      }
    }
  }
  if (last_log && *last_log - offset_ns <= first_sample) {
    entry.stuck_since_ns = *last_log - offset_ns;
    entry.stuck_since_source = "log";
  } else {
    entry.stuck_since_ns = first_sample;
    entry.stuck_since_source = "samples";
  }
}

void settle_state(RankEntry& entry) {
  const auto* latest = entry.latest();
  if (latest == nullptr) return;
  const RankState process_state = state_from_letter(latest->state);
  if (!latest->error.empty() && !latest->dump) {
    entry.state = process_state == RankState::kDead ? RankState::kDead : RankState::kUnknown;
    return;
  }
  if (process_state == RankState::kStopped || process_state == RankState::kDead) {
    entry.state = process_state;
    return;
  }
  const auto* thread = find_thread(*latest, entry.wait.tid);
  if (thread != nullptr && thread->state == '?' && !thread->frames.empty()) {
    // A core: the thread stood in a blocking call, or it ran. Progress is unknown.
    entry.state_from_stack = true;
    entry.state = entry.wait.primitive.empty() ? RankState::kRunning : RankState::kWaiting;
    return;
  }
  entry.state = thread ? state_from_letter(thread->state) : process_state;
  // On CPU inside a wait that nothing shows it completing: a wait that spins (a polling loop,
  // NCCL's busy wait), not work.
  if (entry.state == RankState::kRunning &&
      (spins(entry.wait) ||
       (waits::waits_on_peers(entry.wait.kind) && entry.progress.progressing == false))) {
    entry.state = RankState::kWaiting;
  }
  if (entry.state == RankState::kWaiting && entry.progress.progressing.value_or(false)) {
    entry.state = RankState::kRunning;  // it waits only between pieces of work
  }
}

struct NodeSamples {
  std::vector<const model::NodeSnapshot*> samples;  // by sample index
  std::int64_t offset_ns = 0;
};

// Each node's samples by sample index. A second capture of one node for one sample (two agents
// or files that gave one node name, in a bundle not assembled by assemble_bundle) is another
// node, "NAME#2", with the clock offset of the second node status of that name: its pids are
// another machine's.
std::map<std::string, NodeSamples> samples_by_node(const model::Bundle& bundle,
                                                   std::vector<std::string>& found) {
  struct Capture {
    std::string given;  // the node name the snapshots give
    int k = 1;          // the k-th capture of each of its samples
  };
  std::map<std::string, NodeSamples> nodes;
  std::map<std::string, Capture> captured;               // name in the analysis → capture
  std::map<std::string, std::map<int, int>> per_sample;  // given name → sample index → captures
  for (const auto& s : bundle.snapshots) {
    const int k = ++per_sample[s.node_name][s.sample_index];
    const std::string name = k == 1 ? s.node_name : s.node_name + "#" + std::to_string(k);
    if (captured.emplace(name, Capture{s.node_name, k}).second && k > 1) {
      found.push_back("node " + s.node_name + " has " + std::to_string(k) + " captures of sample " +
                      std::to_string(s.sample_index) +
                      " (two agents or files with one node name?): capture " + std::to_string(k) +
                      " of each sample is taken as node " + name);
    }
    nodes[name].samples.push_back(&s);
  }
  // Each given name's node statuses in order (one pass: a bundle holds thousands of nodes).
  std::unordered_map<std::string_view, std::vector<const model::NodeStatus*>> statuses;
  for (const auto& status : bundle.nodes) statuses[status.name].push_back(&status);
  for (auto& [name, node] : nodes) {
    std::stable_sort(node.samples.begin(), node.samples.end(),
                     [](auto* a, auto* b) { return a->sample_index < b->sample_index; });
    const auto& capture = captured.at(name);
    const auto given = statuses.find(capture.given);
    if (given != statuses.end() && static_cast<std::size_t>(capture.k) <= given->second.size()) {
      node.offset_ns = given->second[static_cast<std::size_t>(capture.k) - 1]->clock_offset_ns;
    }
  }
  return nodes;
}

bool every_node_answered(const model::Bundle& bundle) {
  return std::all_of(bundle.nodes.begin(), bundle.nodes.end(),
                     [](const model::NodeStatus& n) { return n.status == model::NodeState::kOk; });
}

// "node0 pid 1003": a process of the input, for the diagnostics.
std::string process_name(const RankEntry& entry) {
  return entry.node + " pid " + std::to_string(entry.pid);
}

std::string job_name(const std::string& key) {
  return key.empty() ? "(unknown)" : key;
}

// The world size a job's entries agree on: the one most of them claim (the larger of a tie);
// a claim below 1 is no world size. The other claims are named in `found`.
std::optional<int> agreed_world_size(const std::string& job, const std::vector<RankEntry>& ranks,
                                     std::vector<std::string>& found) {
  std::map<int, std::vector<const RankEntry*>> claims;
  for (const auto& r : ranks) {
    const auto ws = r.claimed_world_size;
    if (!ws) continue;
    if (*ws < 1) {
      found.push_back(process_name(r) + " claims a world size of " + std::to_string(*ws) +
                      " for job " + job_name(job) + ": not taken");
      continue;
    }
    claims[*ws].push_back(&r);
  }
  if (claims.empty()) return std::nullopt;
  auto agreed = claims.begin();
  for (auto it = claims.begin(); it != claims.end(); ++it) {
    if (it->second.size() >= agreed->second.size()) agreed = it;
  }
  if (claims.size() > 1) {
    std::vector<std::string> others;
    for (const auto& [ws, holders] : claims) {
      if (ws == agreed->first) continue;
      std::vector<std::string> names;
      for (const auto* r : holders) names.push_back(process_name(*r));
      others.push_back(std::to_string(ws) + " (" + join(names, ", ", 3) + ")");
    }
    found.push_back("job " + job_name(job) + ": its ranks claim different world sizes, " +
                    std::to_string(agreed->first) + " (" + std::to_string(agreed->second.size()) +
                    " processes) and " + join(others, ", ") + "; taken as " +
                    std::to_string(agreed->first));
  }
  return agreed->first;
}

// A job's entries, checked against each other: a rank outside 0..world size-1 and a rank that
// a second live process claims too lose their number (listed without one, out of the graph);
// a dead process (an earlier incarnation) never takes a rank from a live one. Entries by rank,
// those without a rank last.
void settle_ranks(Job& job, std::vector<std::string>& found) {
  for (auto& r : job.ranks) {
    if (r.rank && job.world_size && *r.rank >= *job.world_size) {
      found.push_back(process_name(r) + " claims rank " + std::to_string(*r.rank) + " of job " +
                      job_name(job.key) + ", whose world size is " +
                      std::to_string(*job.world_size) + ": listed without a rank number");
      r.rank.reset();
    }
  }
  const auto order = [](const RankEntry& a, const RankEntry& b) {
    return std::make_tuple(!a.rank, a.rank.value_or(0), a.state == RankState::kDead, a.node,
                           a.pid) <
           std::make_tuple(!b.rank, b.rank.value_or(0), b.state == RankState::kDead, b.node, b.pid);
  };
  std::stable_sort(job.ranks.begin(), job.ranks.end(), order);
  bool changed = false;
  for (std::size_t first = 0; first < job.ranks.size();) {
    std::size_t end = first + 1;
    const auto& kept = job.ranks[first];
    for (; end < job.ranks.size() && kept.rank && job.ranks[end].rank == kept.rank; ++end) {
      auto& other = job.ranks[end];
      if (other.state == RankState::kDead || kept.state == RankState::kDead) continue;
      found.push_back("job " + job_name(job.key) + ": rank " + std::to_string(*kept.rank) +
                      " is claimed by " + process_name(kept) + " and " + process_name(other) +
                      " (two jobs with one MASTER_ADDR:MASTER_PORT?); the analysis follows " +
                      process_name(kept) + ", the other is listed without a rank number");
      other.rank.reset();
      changed = true;
    }
    first = end;
  }
  if (changed) std::stable_sort(job.ranks.begin(), job.ranks.end(), order);
}

// At most this many diagnostics are kept, then how many more there were.
constexpr std::size_t kDiagnosticsShown = 32;

}  // namespace

std::string Job::Group::noun() const {
  std::string lower;
  for (const char c : held_by)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("dp") != std::string::npos ? "DP rank" : "group rank";
}

Progress progress_of(const RankEntry& entry) {
  return measure_progress(entry);
}

std::string_view to_string(RankState state) {
  switch (state) {
    case RankState::kRunning:
      return "running";
    case RankState::kWaiting:
      return "waiting";
    case RankState::kStopped:
      return "stopped";
    case RankState::kUninterruptible:
      return "uninterruptible";
    case RankState::kDead:
      return "dead";
    case RankState::kMissing:
      return "missing";
    case RankState::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string state_label(const RankEntry& entry) {
  return std::string(to_string(entry.state)) + (entry.state_from_stack ? " (stack)" : "");
}

const RankEntry* Job::find(int rank) const {
  const auto it = by_rank.find(rank);
  return it == by_rank.end() ? nullptr : &ranks[it->second];
}

std::optional<RankState> Job::state_of(int rank) const {
  if (const auto* entry = find(rank)) return entry->state;
  if (missing.contains(rank)) return missing_state;
  return std::nullopt;
}

std::vector<const RankEntry*> Job::entries_in(const RankSet& set) const {
  std::vector<const RankEntry*> out;
  for (const auto& interval : set.intervals()) {
    auto it = std::lower_bound(sorted_.begin(), sorted_.end(), interval.first,
                               [](const auto& entry, int rank) { return entry.first < rank; });
    for (; it != sorted_.end() && it->first <= interval.last; ++it) {
      out.push_back(&ranks[it->second]);
    }
  }
  return out;
}

RankEntry Job::absent_entry(int rank) const {
  RankEntry absent;
  absent.job = key;
  absent.rank = rank;
  absent.state = missing_state;
  return absent;
}

void Job::index() {
  by_rank.clear();
  sorted_.clear();
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].rank && by_rank.emplace(*ranks[i].rank, i).second) {  // the first of duplicates
      sorted_.emplace_back(*ranks[i].rank, i);
    }
  }
  std::sort(sorted_.begin(), sorted_.end());
  present = RankSet();
  for (const auto& [rank, i] : sorted_) present.insert(rank);
}

std::vector<Job> build_jobs(const model::Bundle& bundle, std::vector<std::string>* diagnostics) {
  std::vector<std::string> found;  // inconsistencies of the input, in the order met
  std::map<ProcessKey, RankEntry> entries;
  std::map<std::string, Job::Group> group_kinds;  // the jobs of groups outside the registry
  const model::AddressBook book = model::address_book(bundle);
  for (const auto& [name, node] : samples_by_node(bundle, found)) {
    const int newest_index = node.samples.back()->sample_index;
    std::vector<std::pair<const ProcessKey*, RankEntry*>> mine;  // this node's entries
    std::map<int, std::unordered_set<pid_t>> pids_of_sample;     // sample index → pids met
    std::set<pid_t> twice, negative;  // pids already named in a diagnostic
    for (const auto* sample : node.samples) {
      const std::int64_t time = sample->capture_unix_ns - node.offset_ns;
      auto& pids = pids_of_sample[sample->sample_index];
      for (const auto& p : sample->processes) {
        // One process per pid in a sample: a second record would be a second sample of it.
        if (!pids.insert(p.pid).second) {
          if (twice.insert(p.pid).second) {
            found.push_back("node " + name + ": pid " + std::to_string(p.pid) + " is in sample " +
                            std::to_string(sample->sample_index) +
                            " twice; the first record is used");
          }
          continue;
        }
        const bool is_rank = p.identity.role == model::ProcessRole::kRank;
        const std::string& node_name = name;  // a structured binding: lambdas capture a name
        const auto sample_of = [&](ProcessKey key) -> RankEntry& {
          auto [it, added] = entries.try_emplace(std::move(key));
          if (added) mine.emplace_back(&it->first, &it->second);
          auto& entry = it->second;
          entry.node = node_name;
          entry.pid = p.pid;
          entry.role = p.identity.role;
          entry.history.push_back(&p);
          entry.sample_times_ns.push_back(time);
          return entry;
        };
        if (is_rank) {
          auto& entry = sample_of({name, p.pid, p.start_time_ticks, ""});
          entry.job = p.identity.job;
          entry.rank = p.identity.rank;
          entry.claimed_world_size = p.identity.world_size;
          if (entry.rank && *entry.rank < 0) {
            if (negative.insert(p.pid).second) {
              found.push_back(process_name(entry) + " claims rank " + std::to_string(*entry.rank) +
                              " of job " + job_name(entry.job) +
                              ": no rank is negative; listed without a rank number");
            }
            entry.rank.reset();
          }
        }
        const auto held_groups = groups_outside_registry(p, name, book);
        if (is_rank) {
          auto& entry = entries.at({name, p.pid, p.start_time_ticks, ""});
          entry.group_keys.clear();
          for (const auto& held : held_groups) entry.group_keys[held.name] = held.key;
        }
        for (auto held : held_groups) {
          auto& entry = sample_of({name, p.pid, p.start_time_ticks, held.key});
          entry.job = held.key;
          entry.rank = held.group_rank;
          entry.claimed_world_size = held.size;
          entry.group_keys.clear();
          for (const auto& h : held_groups) entry.group_keys[h.name] = h.key;
          if (is_rank) {
            entry.world_job = p.identity.job;
            entry.world_rank = p.identity.rank;
          }
          group_kinds[held.key] = std::move(held.what);
        }
      }
    }
    // A rank seen earlier but gone from the newest sample exited during the capture.
    std::unordered_set<pid_t> in_newest;
    for (const auto* sample : node.samples) {
      if (sample->sample_index != newest_index) continue;
      for (const auto& p : sample->processes) in_newest.insert(p.pid);
    }
    for (auto [key, entry] : mine) {
      if (!in_newest.count(key->pid)) entry->state = RankState::kDead;
    }
    for (auto [key, entry_pointer] : mine) {
      auto& entry = *entry_pointer;
      const auto* latest = entry.latest();
      if (latest->dump) entry.wait = waits::process_wait_point(*latest->dump);
      entry.progress = measure_progress(entry);
      if (entry.state != RankState::kDead) settle_state(entry);
      estimate_stuck_since(entry, node.offset_ns);
    }
  }
  std::map<std::string, Job> jobs;  // by key; a group's after every torch job ("\x7f" first)
  for (auto& [key, entry] : entries) {
    auto& job = jobs[key.group.empty() ? entry.job : "\x7f" + key.group];
    job.key = entry.job;
    if (!key.group.empty()) job.group = group_kinds[key.group];
    job.ranks.push_back(std::move(entry));
  }
  const bool all_answered = every_node_answered(bundle);
  std::vector<Job> out;
  for (auto& [key, job] : jobs) {
    // Any world size is taken at its word, also 2^31 - 1 from a corrupt snapshot: the ranks it
    // says are missing are ranges (Job::missing), not entries. When the ranks disagree, most of
    // them decide.
    job.world_size = agreed_world_size(job.key, job.ranks, found);
    settle_ranks(job, found);
    job.index();
    if (job.world_size) job.missing = RankSet::range(0, *job.world_size - 1) - job.present;
    job.missing_state = all_answered ? RankState::kMissing : RankState::kUnknown;
    out.push_back(std::move(job));
  }
  if (diagnostics != nullptr) {
    const std::size_t more =
        found.size() > kDiagnosticsShown ? found.size() - kDiagnosticsShown : 0;
    found.resize(std::min(found.size(), kDiagnosticsShown));
    if (more > 0) found.push_back("… and " + std::to_string(more) + " more of these");
    diagnostics->insert(diagnostics->end(), found.begin(), found.end());
  }
  return out;
}

}  // namespace hangscope::analysis

// Generic verdicts: the roots of the wait-for graph that other ranks wait for (a straggler, a
// stopped, dead, missing or uninterruptible rank, a rank waiting elsewhere), collective
// mismatches, and nodes that did not answer. Classes and majority are only the fallback when
// the graph has no root; a tie is reported as a tie.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "hangscope/analysis/analysis.h"
#include "hangscope/analysis/rank_set.h"
#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/text.h"
#include "hangscope/model/fact_keys.h"
#include "stateless_order.h"

namespace hangscope::analysis {
namespace {

bool is_root(const RankEntry& r) {
  if (!r.rank || !r.progress.undecided.empty()) return false;  // no verdict on an undecided rank
  if (r.state != RankState::kWaiting) return true;
  return r.waits_for.empty();
}

// The wait-for graph reversed: for each rank present, the ranks that wait for it directly. The
// ranks without an entry (missing, unknown: ranges) are matched against each waiting rank's set.
class Waiters {
 public:
  explicit Waiters(const Job& job) {
    for (const auto& r : job.ranks) {
      if (!r.rank || r.waits_for.empty()) continue;
      waiting_.push_back(&r);
      for (const auto* target : job.entries_in(r.waits_for)) {
        direct_[*target->rank].push_back(*r.rank);
      }
    }
  }
  // Every rank that waits for `root`, directly or through other waiting ranks.
  RankSet of(int root) const {
    const auto it = direct_.find(root);
    return reach(RankSet{root}, it == direct_.end() ? std::vector<int>{} : it->second);
  }
  // Every rank that waits for a rank of `roots`, directly or through other waiting ranks: at the
  // cost of the waiting ranks' intervals, however many ranks `roots` holds.
  RankSet of(const RankSet& roots) const {
    std::vector<int> direct;
    for (const auto* w : waiting_) {
      if (w->waits_for.intersects(roots)) direct.push_back(*w->rank);
    }
    return reach(roots, direct);
  }
  // The ranks of `ranks` that some rank waits for.
  RankSet waited_among(const RankSet& ranks) const {
    RankSet out;
    for (const auto* w : waiting_) out.insert(w->waits_for & ranks);
    return out;
  }

 private:
  RankSet reach(const RankSet& roots, const std::vector<int>& direct) const {
    std::set<int> reached;
    std::vector<int> frontier;
    const auto add = [&](int w) {
      if (!roots.contains(w) && reached.insert(w).second) frontier.push_back(w);
    };
    for (int w : direct) add(w);
    while (!frontier.empty()) {
      const int target = frontier.back();
      frontier.pop_back();
      const auto it = direct_.find(target);
      if (it == direct_.end()) continue;
      for (int w : it->second) add(w);
    }
    return RankSet(reached);
  }

  std::vector<const RankEntry*> waiting_;  // the ranks that wait for some rank
  std::unordered_map<int, std::vector<int>> direct_;
};

std::string where(const RankEntry& r) {
  if (r.history.empty()) return "";
  return " (" + r.node + " pid " + std::to_string(r.pid) + ")";
}

std::string ranks_text(const std::set<int>& ranks) {
  return analysis::ranks_text(RankSet(ranks));
}

// A member of a group's job by its place in the group and what the process is: "DP rank 2's
// engine core (node1 pid 4)", "group rank 2: rank 0 of job 10.0.0.1:29500 (node0 pid 7)".
std::string member_name(const Job& job, const RankEntry& e) {
  const std::string noun = job.group ? job.group->noun() : "rank";
  const std::string place = noun + " " + (e.rank ? std::to_string(*e.rank) : "?");
  if (!job.group) return place + where(e);
  if (e.role == model::ProcessRole::kEngine) return place + "'s engine core" + where(e);
  if (e.world_rank) {
    return place + ": rank " + std::to_string(*e.world_rank) + " of job " + e.world_job + where(e);
  }
  return place + ": " + std::string(model::to_string(e.role)) + " process" + where(e);
}

// The members of a group's job named one by one (a few) or as a range of group ranks.
std::string members_text(const Job& job, const RankSet& ranks) {
  const auto entries = job.entries_in(ranks);
  if (entries.size() > 4 || entries.size() != ranks.size()) {
    return job.group->noun() + "s " + ranks.text();
  }
  std::vector<std::string> names;
  for (const auto* e : entries) names.push_back(member_name(job, *e));
  return join(names, ", ");
}

// What the ranks waiting for the root(s) do, grouped by where they wait.
std::string waiting_text(const Job& job, const RankSet& waiting, bool many_roots = false) {
  std::map<std::string, std::set<int>> by_place;
  for (const auto* r : job.entries_in(waiting)) by_place[r->wait.describe()].insert(*r->rank);
  std::string out;
  for (const auto& [place, ranks] : by_place) {
    if (!out.empty()) out += "; ";
    out += (job.group ? members_text(job, RankSet(ranks)) : ranks_text(ranks)) +
           (ranks.size() == 1 ? " waits" : " wait") +
           (many_roots ? " for them in " : " for it in ") + place;
  }
  return out;
}

// The verdict's membership basis: the best the waiting ranks' edges had. A verdict that rests
// on the whole job assumed as the group says so and stays below 0.5.
void set_membership(const Job& job, const RankSet& waiting, Verdict& v) {
  static const std::vector<std::string> kBest = {"memory", "locals", "flight-recorder", "assumed"};
  std::size_t best = kBest.size();
  for (const auto* e : job.entries_in(waiting)) {
    const auto it = std::find(kBest.begin(), kBest.end(), e->membership);
    best = std::min(best, static_cast<std::size_t>(it - kBest.begin()));
  }
  if (best == kBest.size()) return;
  v.membership = kBest[best];
  if (v.membership == "assumed") {
    v.confidence = std::min(v.confidence, 0.45);
    v.evidence.push_back(
        "the waiting ranks' group members could not be read (no process group in memory, no "
        "group in the waiting frames' locals): the whole job is assumed to be the group; "
        "capture with --locals, or give flight-recorder dumps, to decide it");
  }
}

struct RootKind {
  std::string id;
  std::string title;
  double confidence;
  std::string what;       // "works", "is stopped (SIGSTOP or a debugger)", …
  std::string what_many;  // the same said of several ranks: "work", "are stopped (…)", …
};

RootKind classify_root(const Job& job, const RankEntry& root, const RankSet& waiting) {
  switch (root.state) {
    case RankState::kDead:
      return {verdict_ids::kRankDead, "A rank process died while the others wait for it", 0.9,
              "is dead (exited or a zombie)", "are dead (exited or zombies)"};
    case RankState::kMissing:
      return {verdict_ids::kRankDead, "A rank is missing while the others wait for it", 0.85,
              "is missing: no node that answered runs it",
              "are missing: no node that answered runs them"};
    case RankState::kStopped:
      return {verdict_ids::kRankStopped, "A rank is stopped while the others wait for it", 0.9,
              "is stopped (state T: SIGSTOP, a debugger or job control)",
              "are stopped (state T: SIGSTOP, a debugger or job control)"};
    case RankState::kUninterruptible: {
      const std::string in =
          root.wait.primitive.empty() ? std::string("the kernel") : root.wait.primitive;
      return {verdict_ids::kRankUninterruptible, "A rank is in uninterruptible sleep", 0.85,
              "is in uninterruptible sleep (state D) in " + in,
              "are in uninterruptible sleep (state D) in " + in};
    }
    case RankState::kRunning: {
      const std::string in = " in " + root.wait.describe() + " (" + root.progress.detail + ")";
      return {verdict_ids::kRankStraggler, "A rank is still working while the others wait for it",
              0.85, "works" + in, "work" + in};
    }
    case RankState::kUnknown:
      return {"", "", 0, "", ""};
    case RankState::kWaiting:
      break;
  }
  // Waiting, for nobody the graph knows: in another collective, or somewhere else entirely.
  const auto waiters = job.entries_in(waiting);
  const bool other_collective =
      (root.wait.kind == waits::WaitKind::kCollective ||
       root.wait.kind == waits::WaitKind::kRendezvous) &&
      std::any_of(waiters.begin(), waiters.end(), [&](const RankEntry* r) {
        return r->wait.operation_key() != root.wait.operation_key() || r->group != root.group;
      });
  if (other_collective) {
    return {verdict_ids::kCollectiveMismatch, "Ranks wait in different collectives", 0.85,
            "waits in a different collective, " + root.wait.describe(),
            "wait in a different collective, " + root.wait.describe()};
  }
  return {verdict_ids::kRankDiverged, "A rank waits somewhere else while the others wait for it",
          0.8, "waits in " + root.wait.describe(), "wait in " + root.wait.describe()};
}

// `roots`: ranks present, or ranges of ranks without an entry (missing).
Verdict root_verdict(const Job& job, const RootKind& kind, const RankSet& roots,
                     const RankSet& waiting) {
  Verdict v;
  v.id = kind.id;
  v.title = kind.title;
  v.job = job.key;
  v.confidence = waiting.empty() ? 0.5 : kind.confidence;
  v.diverged_ranks = roots;
  v.waiting_ranks = waiting;
  const bool one = roots.size() == 1;
  const auto root_entries = job.entries_in(roots);
  const std::string named =
      job.group ? members_text(job, roots)
                : (one ? "Rank " : "Ranks ") + roots.text() +
                      (one && root_entries.size() == 1 ? where(*root_entries.front()) : "");
  v.summary = named + " " + (one ? kind.what : kind.what_many) +
              (waiting.empty() ? "." : " while " + waiting_text(job, waiting, !one) + ".");
  if (job.group) {
    for (auto& line : stateless_order_evidence(job, waiting)) v.evidence.push_back(std::move(line));
    v.evidence.push_back("group " + job.key + " (" + job.group->type + " outside torch's " +
                         "registry, held as " + job.group->held_by +
                         "): its members are the processes that hold it, by their rank in it");
  }
  for (const auto* e : job.entries_in(roots)) {
    std::string line = "rank " + std::to_string(*e->rank) + where(*e) + ": state " +
                       std::string(to_string(e->state));
    if (!e->history.empty()) line += ", " + e->wait.describe() + "; " + e->progress.detail;
    if (!e->waits_for_reason.empty()) line += "; " + e->waits_for_reason;
    v.evidence.push_back(line);
  }
  if (const RankSet absent = roots - job.present; !absent.empty()) {
    v.evidence.push_back(analysis::ranks_text(absent) + ": state " +
                         std::string(to_string(job.missing_state)));
  }
  std::map<std::string, std::set<int>> reasons;
  for (const auto* e : job.entries_in(waiting)) reasons[e->waits_for_reason].insert(*e->rank);
  for (const auto& [reason, ranks] : reasons) {
    v.evidence.push_back(ranks_text(ranks) + (ranks.size() == 1 ? " waits" : " wait") +
                         " for it (" + reason + ")");
  }
  if (job.world_size) {
    v.evidence.push_back("world size " + std::to_string(*job.world_size) + " (job " + job.key +
                         ")");
  }
  set_membership(job, waiting, v);
  return v;
}

// The Python frames of the thread a rank waits in, outermost first.
std::vector<const model::Frame*> outer_frames(const RankEntry& r) {
  std::vector<const model::Frame*> out;
  const auto* p = r.latest();
  if (p == nullptr || !p->dump) return out;
  for (const auto& t : p->dump->threads) {
    if (t.tid != r.wait.tid) continue;
    for (auto f = t.python_frames.rbegin(); f != t.python_frames.rend(); ++f) out.push_back(&*f);
  }
  return out;
}

// Program order of two waiting ranks: the outermost frame where their stacks part, when it is the
// same function called on at different lines, puts the one at the later line past the other's
// call. +1: `a` is ahead, -1: `b` is, 0: unknown (different paths, or the same line).
struct Order {
  int sign = 0;
  std::string detail;  // "in main (job.py): line 31 against line 24"
};
Order program_order(const RankEntry& a, const RankEntry& b) {
  const auto fa = outer_frames(a);
  const auto fb = outer_frames(b);
  for (std::size_t i = 0; i < fa.size() && i < fb.size(); ++i) {
    const auto& x = *fa[i];
    const auto& y = *fb[i];
    if (x.file != y.file || x.function != y.function) return {};
    if (x.line == y.line) continue;
    Order order;
    order.sign = x.line > y.line ? 1 : -1;
    order.detail = "in " + (x.qualname.empty() ? x.function : x.qualname) + " (" +
                   waits::short_path(x.file) + ")";
    return order;
  }
  return {};
}

// The collectives a rank issued on a process group, from its C++ ProcessGroup's sequence number.
std::optional<std::uint64_t> sequence_on(const RankEntry& r, const std::string& group) {
  const auto* p = r.latest();
  if (group.empty() || p == nullptr || !p->dump || !p->dump->distributed) return std::nullopt;
  const auto* g = p->dump->distributed->find(group);
  return g ? g->sequence : std::nullopt;
}

using Sides = std::vector<std::pair<std::string, std::set<int>>>;

// The ranks of every side but `named`.
std::set<int> others_than(const Sides& sides, const std::set<int>& named) {
  std::set<int> out;
  for (const auto& [key, ranks] : sides) {
    for (int r : ranks) {
      if (!named.count(r)) out.insert(r);
    }
  }
  return out;
}

// One evidence line per side (where it waits, on which group), and the verdict's membership.
void describe_sides(const Job& job, const Sides& sides, Verdict& v) {
  std::set<int> all;
  for (const auto& [key, ranks] : sides) {
    const auto* any = job.find(*ranks.begin());
    v.evidence.push_back(ranks_text(ranks) + " in " + any->wait.describe() +
                         (any->group.empty() ? "" : " on process group " + any->group));
    all.insert(ranks.begin(), ranks.end());
  }
  set_membership(job, RankSet(all), v);
}

// Ranks in a collective of group G that most of G went past without: they issued a collective
// the rest of the group never does. The sequence numbers confirm it when read (theirs is higher).
Verdict extra_collective_verdict(const Job& job, const std::set<int>& extra,
                                 const std::set<int>& past, const Sides& sides) {
  Verdict v;
  v.id = verdict_ids::kCollectiveMismatch;
  v.title = "A rank issued a collective the rest of its group never does";
  v.job = job.key;
  v.confidence = 0.85;
  v.diverged_ranks = RankSet(extra);
  v.waiting_ranks = RankSet(others_than(sides, extra));
  const auto* odd = job.find(*extra.begin());
  const auto* other = job.find(*past.begin());
  v.summary = (extra.size() == 1 ? "Rank " : "Ranks ") + compress_ranks(extra) +
              (extra.size() == 1 ? " waits" : " wait") + " in " + odd->wait.describe() +
              (odd->group.empty() ? "" : " on process group " + odd->group) + ", which " +
              ranks_text(past) + " of the same group went past without: " +
              (past.size() == 1 ? "it waits" : "they wait") + " in " + other->wait.describe() + ".";
  if (!odd->group.empty()) {
    const auto mine = sequence_on(*odd, odd->group);
    const auto theirs = sequence_on(*other, odd->group);
    if (mine && theirs) {
      v.evidence.push_back("sequence numbers of process group " + odd->group + ": rank " +
                           std::to_string(*odd->rank) + " has issued " + std::to_string(*mine) +
                           ", rank " + std::to_string(*other->rank) + " " +
                           std::to_string(*theirs) +
                           (*mine > *theirs ? " (one more: a collective only it issued)" : ""));
      if (*mine > *theirs) v.confidence = 0.9;
    }
  }
  v.evidence.push_back(ranks_text(past) + " of the group went past the collective, " +
                       ranks_text(extra) + " " + (extra.size() == 1 ? "waits" : "wait") +
                       " in it: the group's majority decides which side diverged");
  describe_sides(job, sides, v);
  return v;
}

// A cycle with no root, decided by program order: one side's ranks stand past the collective
// the other sides wait in (a later line of the function they share), so the ranks among them
// that the others wait for skipped it. The per-group sequence numbers confirm it when read.
std::optional<Verdict> skipped_collective_verdict(const Job& job, const Sides& sides) {
  std::optional<std::size_t> ahead;
  std::string detail;
  for (std::size_t i = 0; i < sides.size(); ++i) {
    const auto* a = job.find(*sides[i].second.begin());
    bool past_all = true;
    std::string lines;
    for (std::size_t j = 0; j < sides.size() && past_all; ++j) {
      if (j == i) continue;
      const auto* b = job.find(*sides[j].second.begin());
      const auto order = program_order(*a, *b);
      past_all = order.sign > 0;
      if (past_all) lines = order.detail;
    }
    if (!past_all) continue;
    if (ahead) return std::nullopt;  // two sides ahead of each other: no order
    ahead = i;
    detail = lines;
  }
  if (!ahead) return std::nullopt;
  const auto& front = sides[*ahead].second;
  // The ranks of the front side that the other sides wait for (they went past), and the ranks
  // that wait for them (still in the collective).
  std::set<int> skipped, in_collective;
  for (std::size_t j = 0; j < sides.size(); ++j) {
    if (j == *ahead) continue;
    for (int w : sides[j].second) {
      for (int target : (job.find(w)->waits_for & RankSet(front)).list()) {
        skipped.insert(target);
        in_collective.insert(w);
      }
    }
  }
  if (skipped.empty()) return std::nullopt;
  // What the group as a whole shows: when more of its members went past the collective than
  // wait in it, the waiting ones issued a collective the rest of the group never does (a call
  // only they make), and they are the ones that diverged.
  if (skipped.size() > in_collective.size()) {
    return extra_collective_verdict(job, in_collective, skipped, sides);
  }
  const std::set<int> waiting = others_than(sides, skipped);
  Verdict v;
  v.id = verdict_ids::kCollectiveMismatch;
  v.title = "A rank skipped a collective its group waits in";
  v.job = job.key;
  v.confidence = 0.8;
  v.diverged_ranks = RankSet(skipped);
  v.waiting_ranks = RankSet(waiting);
  const auto* d = job.find(*skipped.begin());
  const RankEntry* behind = nullptr;
  for (int w : waiting) {
    const auto* e = job.find(w);
    if (e && e->waits_for.contains(*skipped.begin())) {
      behind = e;
      break;
    }
  }
  v.summary = (skipped.size() == 1 ? "Rank " : "Ranks ") + compress_ranks(skipped) + " went past " +
              (behind ? behind->wait.describe() : std::string("a collective")) +
              " without taking part and now " + (skipped.size() == 1 ? "waits" : "wait") + " in " +
              d->wait.describe() + ", while " +
              waiting_text(job, v.waiting_ranks, skipped.size() > 1) + ".";
  v.evidence.push_back("program order " + detail + ": " + ranks_text(front) +
                       " stand at a later "
                       "line than the ranks waiting in the other collective");
  if (behind != nullptr && !behind->group.empty()) {
    const auto theirs = sequence_on(*behind, behind->group);
    const auto mine = sequence_on(*d, behind->group);
    if (theirs && mine) {
      v.evidence.push_back(
          "sequence numbers of process group " + behind->group + ": rank " +
          std::to_string(*behind->rank) + " has issued " + std::to_string(*theirs) + ", rank " +
          std::to_string(*d->rank) + " " + std::to_string(*mine) +
          (*mine < *theirs ? " (behind: it never issued the collective its peers wait in)"
                           : " (not behind: the order rests on the stacks alone)"));
      if (*mine < *theirs) v.confidence = 0.9;
      if (*mine >= *theirs) v.confidence = 0.6;
    }
  }
  describe_sides(job, sides, v);
  return v;
}

// No root anyone waits for, but waiting ranks in different collectives wait for each other.
std::optional<Verdict> cycle_verdict(const Job& job) {
  std::map<std::string, std::set<int>> sides;
  for (const auto& r : job.ranks) {
    if (r.rank && r.state == RankState::kWaiting && !r.waits_for.empty()) {
      sides[r.wait.operation_key() + "@" + r.group].insert(*r.rank);
    }
  }
  if (sides.size() < 2) return std::nullopt;
  std::vector<std::pair<std::string, std::set<int>>> ordered(sides.begin(), sides.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  if (auto skipped = skipped_collective_verdict(job, ordered)) return skipped;
  Verdict v;
  v.id = verdict_ids::kCollectiveMismatch;
  v.title = "Ranks wait in different collectives";
  v.job = job.key;
  std::string described;
  std::set<int> everyone;
  for (const auto& [key, ranks] : ordered) {
    const auto* any = job.find(*ranks.begin());
    const std::string text = ranks_text(ranks) + " in " + any->wait.describe();
    v.evidence.push_back(text);
    described += (described.empty() ? "" : "; ") + text;
    everyone.insert(ranks.begin(), ranks.end());
  }
  v.evidence.push_back(
      "each side waits for the other (the wait-for graph is a cycle with no root) and neither "
      "the stacks nor the groups' sequence numbers order them, so the smaller side is named: a "
      "majority fallback. Flight-recorder dumps (TORCH_FR_BUFFER_SIZE / "
      "TORCH_NCCL_TRACE_BUFFER_SIZE with `collect --trigger-fr-dump`) or `--query-store` would "
      "decide it");
  const bool tie = ordered[0].second.size() == ordered[1].second.size();
  if (tie) {
    v.confidence = 0.4;
    v.waiting_ranks = RankSet(everyone);
    v.summary = "Tie: ranks wait in different collectives in groups of equal size (" + described +
                "); the samples cannot tell which side diverged.";
    set_membership(job, v.waiting_ranks, v);
    return v;
  }
  v.confidence = 0.45;
  v.diverged_ranks = RankSet(ordered[0].second);
  std::set<int> others;
  for (std::size_t i = 1; i < ordered.size(); ++i) {
    others.insert(ordered[i].second.begin(), ordered[i].second.end());
  }
  v.waiting_ranks = RankSet(others);
  const auto* diverged = job.find(*ordered[0].second.begin());
  v.summary = (ordered[0].second.size() == 1 ? "Rank " : "Ranks ") +
              compress_ranks(ordered[0].second) + " waits in a different collective (" +
              diverged->wait.describe() + ") than the other ranks (" + described + ").";
  set_membership(job, RankSet(everyone), v);
  return v;
}

// The members of the group a waiting rank waits in: its process group's ranks from memory, else
// the group ranks its waiting frame names; nullopt when not known.
std::optional<RankSet> group_members(const RankEntry& r) {
  if (const auto* group = awaited_group(r); group != nullptr) {
    if (!group->ranks.empty()) return RankSet(group->ranks);
    if (group->size > 0) return RankSet::range(0, group->size - 1);
  }
  return std::nullopt;
}

// What the ranks of a stalled collective show about the transport, one line each: the TCP
// connections between them, the nodes' interfaces, GPU facts (NCCL RAS is added with the
// evidence of every verdict).
void add_transport_facts(const Job& job, const std::vector<const RankEntry*>& ranks, Verdict& v) {
  std::set<std::string> nodes;
  for (const auto* r : ranks) {
    if (r->tcp_known && !r->missing_tcp_peers.empty()) {
      v.evidence.push_back("rank " + std::to_string(*r->rank) + " (" + r->node +
                           ") has no TCP connection to " + compress_ranks(r->missing_tcp_peers));
    }
    const auto* p = r->latest();
    if (p == nullptr || !nodes.insert(r->node).second) continue;
    for (const char* key : {model::fact_keys::kNetInterfaces, model::fact_keys::kGpuModel,
                            model::fact_keys::kGpuLinks, model::fact_keys::kGpuNotes}) {
      if (const auto it = p->facts.find(key); it != p->facts.end() && !it->second.empty()) {
        v.evidence.push_back(r->node + " " + key + ": " + it->second);
      }
    }
  }
  // The connections' queues: a link that lost its traffic leaves bytes the peer never
  // acknowledged, and retransmission timeouts that keep growing.
  bool sockets_read = false, backlog = false;
  for (const auto* r : ranks) {
    const auto* p = r->latest();
    if (p == nullptr || !p->dump) continue;
    std::uint64_t unacknowledged = 0, timeouts = 0;
    std::set<std::string> peers;
    for (const auto& socket : p->dump->sockets) {
      if (socket.family != model::Socket::Family::kTcp ||
          socket.state != model::SocketState::kEstablished) {
        continue;
      }
      sockets_read = true;
      if (socket.tx_queue == 0 && socket.retransmits == 0) continue;
      unacknowledged += socket.tx_queue;
      timeouts += socket.retransmits;
      peers.insert(socket.remote.substr(0, socket.remote.rfind(':')));
    }
    if (peers.empty()) continue;
    backlog = true;
    v.evidence.push_back("rank " + std::to_string(*r->rank) + " (" + r->node +
                         "): " + std::to_string(unacknowledged) +
                         " bytes sent that the peer has not acknowledged and " +
                         std::to_string(timeouts) + " retransmission timeouts on its TCP " +
                         "connections to " +
                         join(std::vector<std::string>(peers.begin(), peers.end()), ", ", 4) +
                         ": the network between them drops the traffic");
  }
  if (sockets_read && !backlog && job.tcp_meshed) {
    v.evidence.push_back(
        "no TCP connection of these ranks holds unacknowledged data: what was sent arrived, so "
        "the stall is in the processes that should answer (their transport threads) rather "
        "than in the network");
  }
  if (job.tcp_meshed) {
    const bool all_connected = std::all_of(ranks.begin(), ranks.end(), [](const RankEntry* r) {
      return r->tcp_known && r->missing_tcp_peers.empty();
    });
    if (all_connected) {
      v.evidence.push_back(
          "every rank still holds its TCP connections to the others: a link that lost its "
          "traffic without closing them (a cable, a switch, a firewall), or a peer's process "
          "that stopped reading");
    }
  }
}

// Every member of a group inside the same collective, none of them completing it (no stack
// moved, no probe caught one outside it, no sequence number advanced): no rank diverged, the
// transport between them stalls. The live counterpart of the post-mortem verdict of the same id.
std::optional<Verdict> transport_verdict(const Job& job) {
  std::map<std::string, std::vector<const RankEntry*>> sides;  // operation@group → its ranks
  for (const auto& r : job.ranks) {
    if (!r.rank || r.state != RankState::kWaiting || r.progress.progressing != false ||
        r.wait.kind != waits::WaitKind::kCollective) {
      continue;
    }
    sides[r.wait.operation_key() + "@" + r.group].push_back(&r);
  }
  for (const auto& [key, ranks] : sides) {
    if (ranks.size() < 2) continue;
    std::set<int> in_it;
    for (const auto* r : ranks) in_it.insert(*r->rank);
    const RankSet stalled(in_it);
    // Its members: the group's (every member must be in it), else the whole job with every
    // rank present.
    const auto members = group_members(*ranks.front());
    if (members
            ? !(*members - stalled).empty()
            : !job.missing.empty() || stalled != job.present ||
                  (job.world_size && static_cast<std::size_t>(*job.world_size) != in_it.size())) {
      continue;
    }
    Verdict v;
    v.id = verdict_ids::kCollectiveTransport;
    v.title =
        "Every rank is in the same collective and none completes it: the transport, not a rank";
    v.job = job.key;
    v.confidence = 0.7;
    v.waiting_ranks = stalled;
    const auto& any = *ranks.front();
    const std::string group =
        any.group.empty() ? std::string("the job") : "process group " + any.group;
    v.summary = "Every rank of " + group + " (ranks " + stalled.text() + ") waits in " +
                any.wait.describe() +
                " and none completes it; no rank is behind, elsewhere or working: the transport "
                "(network, NCCL, a GPU or link) is the suspect.";
    std::map<std::string, std::set<int>> sequences;  // "unchanged at N" → ranks
    std::uint32_t probes = 0;
    for (const auto* r : ranks) {
      probes += r->progress.probes;
      const auto& p = r->progress;
      const std::string what = !p.sequence_last ? "no sequence number read"
                               : p.sequence_group.empty()
                                   ? "no process group's sequence number advanced"
                                   : "process group " + p.sequence_group +
                                         " sequence number unchanged at " +
                                         std::to_string(*p.sequence_last);
      sequences[what].insert(*r->rank);
    }
    for (const auto& [what, holders] : sequences) {
      v.evidence.push_back(ranks_text(holders) + ": " + what);
    }
    v.evidence.push_back(
        probes > 0 ? "none of " + std::to_string(probes) +
                         " probes between the samples found a rank outside the collective"
                   : "no probe was taken between the samples (a capture without probes): the "
                     "stacks alone show no rank leaving the collective");
    if (sequences.size() > 1) {
      v.evidence.push_back(
          "the ranks' sequence numbers differ by the collective the stall cut in two: some "
          "ranks received every part of it before the others could");
    }
    add_transport_facts(job, ranks, v);
    v.remedies = {
        "check the links between the nodes now, while the job hangs: `ip -s link` and the "
        "interface named by GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME, firewalls, NCCL logs with "
        "NCCL_DEBUG=INFO, NCCL RAS, Xid messages and link errors in the kernel log"};
    set_membership(job, stalled, v);
    return v;
  }
  return std::nullopt;
}

}  // namespace

std::vector<Verdict> generic_verdicts(const Job& job) {
  std::vector<Verdict> out;
  // Roots grouped by verdict, state and place, each with the ranks that wait for it.
  struct Group {
    RootKind kind;
    RankSet roots;
    RankSet waiting;
  };
  std::map<std::string, Group> groups;
  const Waiters graph(job);
  // `root` stands for `roots` (the same state and place), which `waiters` wait for.
  const auto add = [&](const RankEntry& root, const RankSet& roots, const RankSet& waiters) {
    const bool notable = root.state == RankState::kStopped || root.state == RankState::kDead ||
                         root.state == RankState::kUninterruptible ||
                         root.state == RankState::kMissing;
    if (roots.empty() || (waiters.empty() && !notable)) return;
    const RootKind kind = classify_root(job, root, waiters);
    if (kind.id.empty()) return;  // unknown: the node verdict covers it
    const std::string key = kind.id + "|" + std::string(to_string(root.state)) + "|" +
                            root.wait.class_key() + "|" + (waiters.empty() ? "0" : "1");
    auto& group = groups.try_emplace(key, Group{kind, {}, {}}).first->second;
    group.roots.insert(roots);
    group.waiting.insert(waiters);
  };
  for (const auto& r : job.ranks) {
    if (is_root(r)) add(r, RankSet{*r.rank}, graph.of(*r.rank));
  }
  // The ranks without an entry are roots as ranges: those some rank waits for, and the others.
  if (!job.missing.empty()) {
    const RankEntry absent = job.absent_entry(job.missing.front());
    const RankSet waited = graph.waited_among(job.missing);
    add(absent, waited, graph.of(waited));
    add(absent, job.missing - waited, {});
  }
  for (const auto& [key, group] : groups) {
    out.push_back(root_verdict(job, group.kind, group.roots, group.waiting - group.roots));
  }
  if (out.empty()) {
    if (auto v = cycle_verdict(job)) out.push_back(std::move(*v));
  }
  if (out.empty()) {
    if (auto v = transport_verdict(job)) out.push_back(std::move(*v));
  }
  return out;
}

std::vector<Verdict> node_verdicts(const std::vector<Job>& jobs,
                                   const std::vector<model::NodeStatus>& nodes) {
  std::vector<Verdict> out;
  // When no node answered and no rank was read, nothing was looked at: that is a failure
  // (exit 1, the nodes named in the error), not a verdict about a hang.
  const bool any_answer =
      std::any_of(nodes.begin(), nodes.end(),
                  [](const auto& n) { return n.status == model::NodeState::kOk; }) ||
      std::any_of(jobs.begin(), jobs.end(), [](const Job& job) {
        return std::any_of(job.ranks.begin(), job.ranks.end(),
                           [](const auto& r) { return !r.history.empty(); });
      });
  if (!any_answer) return out;
  for (const auto& node : nodes) {
    // A snapshot file that could not be read is an input error, reported with the nodes.
    if (node.status == model::NodeState::kOk ||
        (node.status == model::NodeState::kError && !node.address)) {
      continue;
    }
    Verdict v;
    const bool refused = node.status == model::NodeState::kRefused;
    const bool busy = node.status == model::NodeState::kBusy;
    v.id = refused ? verdict_ids::kNodeRefused
           : busy  ? verdict_ids::kNodeBusy
                   : verdict_ids::kNodeUnreachable;
    v.title = refused ? "A node's agent refused the request"
              : busy  ? "A node's agent was busy with other captures"
                      : "A node did not answer";
    const std::string name = node.address ? node.name + " (" + *node.address + ")" : node.name;
    v.evidence.push_back(name + ": " + std::string(model::to_string(node.status)) +
                         (node.error.empty() ? "" : ": " + node.error));
    RankSet unknown_waited, waiters;
    for (const auto& job : jobs) {
      // The job's ranks on no answering node are unknown (ranges): those some rank waits for.
      if (job.missing_state != RankState::kUnknown || job.missing.empty()) continue;
      const Waiters graph(job);
      const RankSet waited = graph.waited_among(job.missing);
      if (waited.empty()) continue;
      unknown_waited.insert(waited);
      waiters.insert(graph.of(waited));
      if (v.job.empty()) v.job = job.key;
    }
    v.diverged_ranks = unknown_waited;
    v.waiting_ranks = waiters;
    v.confidence = unknown_waited.empty() ? 0.6 : 0.9;
    v.summary =
        "Node " + name + " " +
        (refused ? "refused the request"
         : busy  ? "was busy until the deadline"
                 : "did not answer") +
        (unknown_waited.empty()
             ? "; its ranks are unknown."
             : "; " + ranks_text(waiters) + (waiters.size() == 1 ? " waits for " : " wait for ") +
                   ranks_text(unknown_waited) + ", whose state is unknown (not captured).");
    v.remedies.push_back(
        refused ? "check the token or TLS credentials given to diagnose"
        : busy  ? "other diagnose runs were capturing that node: run diagnose again"
                : "check that `hangscope collect` runs on that node and that its address and "
                  "port are reachable from here");
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace hangscope::analysis

// Post-mortem matching of send/recv flight-recorder entries between peers: which rank never sent
// what its peer waits to receive, or never posted the recv its peer sends to.
#include "p2p_matching.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "flight_groups.h"
#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/numbers.h"

namespace hangscope::analysis {
namespace {

using model::FlightEntry;
using model::FlightGroup;
using model::FlightRecord;

// "nccl:send 0->1" (this rank 0 sends to 1) and "nccl:recv 1<-0" (this rank 1 receives from 0):
// group ranks, as torch's ProcessGroupNCCL names its point-to-point work.
struct P2PName {
  bool send = false;
  int self = 0;
  int peer = 0;
};

std::optional<P2PName> parse_p2p_name(std::string_view name) {
  const auto colon = name.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  name.remove_prefix(colon + 1);
  P2PName out;
  if (name.substr(0, 5) == "send ") {
    out.send = true;
  } else if (name.substr(0, 5) != "recv ") {
    return std::nullopt;
  }
  name.remove_prefix(5);
  const auto arrow = name.find(out.send ? "->" : "<-");
  if (arrow == std::string_view::npos) return std::nullopt;
  const auto self = to_int(name.substr(0, arrow));
  const auto peer = to_int(name.substr(arrow + 2));
  if (!self || !peer) return std::nullopt;
  out.self = *self;
  out.peer = *peer;
  return out;
}

// One direction between two ranks of a group: the sender's sends to the receiver and the
// receiver's recvs from the sender, oldest first.
struct Channel {
  const FlightGroup* group = nullptr;
  std::vector<const FlightEntry*> sends, recvs;
};
using ChannelKey = std::tuple<std::string, int, int>;  // group id, sender, receiver (global)

// The global rank of a group rank: torch numbers a group's members by their sorted global ranks.
std::optional<int> global_rank(const std::vector<int>& sorted_members, int group_rank) {
  if (group_rank < 0 || group_rank >= static_cast<int>(sorted_members.size())) return std::nullopt;
  return sorted_members[static_cast<std::size_t>(group_rank)];
}

std::map<ChannelKey, Channel> channels_of(const std::map<int, const FlightRecord*>& dumps) {
  std::map<ChannelKey, Channel> out;
  for (const auto& [rank, fr] : dumps) {
    std::map<std::string, std::vector<int>> sorted;  // per group, sorted once per dump
    for (const auto& [id, g] : fr->groups) {
      auto& members = sorted[id] = g.ranks;
      std::sort(members.begin(), members.end());
    }
    for (const auto& e : fr->entries) {
      const auto name = parse_p2p_name(e.profiling_name);
      const auto g = fr->groups.find(e.pg);
      if (!name || g == fr->groups.end()) continue;
      const auto self = global_rank(sorted[e.pg], name->self);
      const auto peer = global_rank(sorted[e.pg], name->peer);
      if (self != rank || !peer || !dumps.count(*peer)) continue;  // the peer's side is unknown
      auto& channel = out[{e.pg, name->send ? rank : *peer, name->send ? *peer : rank}];
      channel.group = &g->second;
      (name->send ? channel.sends : channel.recvs).push_back(&e);
    }
  }
  return out;
}

// A rank waiting in a point-to-point op for a peer that never issued its side.
struct Wait {
  int waiter = 0;
  int peer = 0;
  const FlightEntry* entry = nullptr;  // the waiter's pending op
  const FlightGroup* group = nullptr;
  bool in_recv = false;  // waits in a recv the peer never sent; else in a send never received
};

struct PairMismatch {
  int sender = 0, receiver = 0;
  const FlightEntry *send = nullptr, *recv = nullptr;
  const FlightGroup* group = nullptr;
  std::string what;
};

std::string sizes_received(const FlightEntry& recv) {
  return recv.output_sizes.empty() ? recv.input_sizes : recv.output_sizes;
}

std::string pair_difference(const FlightEntry& send, const FlightEntry& recv) {
  std::vector<std::string> fields;
  if (send.input_sizes != sizes_received(recv)) fields.push_back("sizes");
  if (send.input_dtypes != recv.input_dtypes) fields.push_back("dtypes");
  std::string out;
  for (const auto& f : fields) out += (out.empty() ? "" : " and ") + f;
  return out;
}

// A send and its recv both posted, neither completed, sizes and dtypes alike.
struct Stalled {
  int sender = 0, receiver = 0;
  const FlightEntry *send = nullptr, *recv = nullptr;
  const FlightGroup* group = nullptr;
};

struct Findings {
  std::vector<Wait> waits;
  std::vector<PairMismatch> mismatches;
  std::vector<Stalled> stalled;
};

void match_channel(const ChannelKey& key, const Channel& c, Findings& out) {
  const auto& [pg, sender, receiver] = key;
  const auto split = [](const std::vector<const FlightEntry*>& ops) {
    std::pair<std::vector<const FlightEntry*>, std::vector<const FlightEntry*>> done_pending;
    for (const auto* e : ops) {
      (e->state == model::FlightState::kCompleted ? done_pending.first : done_pending.second)
          .push_back(e);
    }
    return done_pending;
  };
  const auto [sent, sending] = split(c.sends);
  const auto [received, receiving] = split(c.recvs);
  std::vector<std::pair<const FlightEntry*, const FlightEntry*>> pairs;
  for (std::size_t i = 0; i < std::min(sent.size(), received.size()); ++i) {
    pairs.emplace_back(sent[sent.size() - 1 - i], received[received.size() - 1 - i]);
  }
  for (std::size_t i = 0; i < std::min(sending.size(), receiving.size()); ++i) {
    pairs.emplace_back(sending[i], receiving[i]);
    if (i == 0 && pair_difference(*sending[i], *receiving[i]).empty()) {
      out.stalled.push_back({sender, receiver, sending[i], receiving[i], c.group});
    }
  }
  for (const auto& [send, recv] : pairs) {
    if (auto what = pair_difference(*send, *recv); !what.empty()) {
      out.mismatches.push_back({sender, receiver, send, recv, c.group, std::move(what)});
      break;  // the first per direction: later pairs may be off by it
    }
  }
  if (receiving.size() > sending.size()) {
    out.waits.push_back({receiver, sender, receiving[sending.size()], c.group, true});
  } else if (sending.size() > receiving.size()) {
    out.waits.push_back({sender, receiver, sending[receiving.size()], c.group, false});
  }
}

// "flight recorder, rank 6 waits in a recv from rank 4 in process group 1 (pp_0) (nccl:recv 3<-2
// #4 … started; group ranks in the name), which rank 4 never sent".
std::string wait_line(const Wait& w) {
  const std::string peer = std::to_string(w.peer);
  return "flight recorder, rank " + std::to_string(w.waiter) + " waits in a " +
         (w.in_recv ? "recv from" : "send to") + " rank " + peer + " in " + group_name(*w.group) +
         " (" + w.entry->describe() + "; group ranks in the name), " +
         (w.in_recv ? "which rank " + peer + " never sent"
                    : "whose recv rank " + peer + " never posted");
}

// The rank each waiting rank ends at by following the waits: a rank that waits for nobody (the
// culprit), or -1 when the chain runs into a cycle.
int end_of_chain(int rank, const std::map<int, const Wait*>& first_wait) {
  std::set<int> seen;
  while (true) {
    const auto it = first_wait.find(rank);
    if (it == first_wait.end()) return rank;
    if (!seen.insert(rank).second) return -1;
    rank = it->second->peer;
  }
}

std::vector<Verdict> unmatched_verdicts(const Job& job, const std::vector<Wait>& waits) {
  std::map<int, const Wait*> first_wait;  // a rank waits in one op at a time: its first pending
  for (const auto& w : waits) first_wait.emplace(w.waiter, &w);
  std::map<int, std::set<int>> behind;  // culprit (-1: a cycle) → the ranks that wait for it
  for (const auto& [rank, w] : first_wait) behind[end_of_chain(rank, first_wait)].insert(rank);
  std::vector<Verdict> out;
  for (const auto& [culprit, waiting] : behind) {
    if (culprit < 0) {
      auto v = flight_verdict(job, verdict_ids::kP2pUnmatched,
                              "Ranks wait for each other in point-to-point operations", 0.8);
      v.diverged_ranks = RankSet(std::vector<int>(waiting.begin(), waiting.end()));
      v.summary = "Ranks " + compress_ranks(v.diverged_ranks) +
                  " wait for each other in point-to-point operations, each in a send or recv "
                  "the next never matches: the order of their sends and recvs deadlocks.";
      for (int r : waiting) v.evidence.push_back(wait_line(*first_wait.at(r)));
      v.remedies = {
          "order the sends and recvs so that each send meets a posted recv (one side sends "
          "first, the other receives first), or issue them together with batch_isend_irecv"};
      out.push_back(std::move(v));
      continue;
    }
    auto v = flight_verdict(job, verdict_ids::kP2pUnmatched,
                            "A rank never issued the send or recv its peer waits in", 0.85);
    v.diverged_ranks = RankSet(std::vector<int>{culprit});
    v.waiting_ranks = RankSet(std::vector<int>(waiting.begin(), waiting.end()));
    // The rank waiting in a recv from the culprit tells the story best ("never sent").
    const Wait* direct = nullptr;
    for (int r : waiting) {
      const Wait* w = first_wait.at(r);
      if (w->peer == culprit && (direct == nullptr || (w->in_recv && !direct->in_recv))) {
        direct = w;
      }
    }
    const std::string c = std::to_string(culprit);
    const std::string w = std::to_string(direct->waiter);
    v.summary = "Rank " + c +
                (direct->in_recv ? " never sent what rank " + w + " waits to receive"
                                 : " never posted the recv for rank " + w + "'s send") +
                " in " + group_name(*direct->group) + ": rank " + w + " is in " +
                direct->entry->describe() + " (group ranks).";
    if (waiting.size() > 1) {
      v.summary += " Ranks " + compress_ranks(v.waiting_ranks) +
                   " wait for it, directly or through a peer that waits for it.";
    }
    for (int r : waiting) v.evidence.push_back(wait_line(*first_wait.at(r)));
    v.remedies = {
        "look at what rank " + c +
        " did instead of its send or recv (its own collectives in this report, its log): a "
        "pipeline stage that took another branch, failed, or waits elsewhere"};
    out.push_back(std::move(v));
  }
  return out;
}

Verdict mismatch_verdict(const Job& job, const PairMismatch& m) {
  auto v = flight_verdict(job, verdict_ids::kP2pMismatch,
                          "A send and its matching recv disagree (sizes or dtypes)", 0.85);
  v.diverged_ranks = RankSet(std::vector<int>{m.sender, m.receiver});
  const std::string s = std::to_string(m.sender), r = std::to_string(m.receiver);
  v.summary = "Rank " + s + "'s send to rank " + r + " (" + m.send->describe() + ") and rank " + r +
              "'s recv from rank " + s + " (" + m.recv->describe() + ") in " +
              group_name(*m.group) + " differ in " + m.what + " (group ranks in the names).";
  v.evidence = {"flight recorder, rank " + s + ": " + m.send->describe(),
                "flight recorder, rank " + r + ": " + m.recv->describe()};
  v.remedies = {
      "make both sides agree on the tensor's shape and dtype (a pipeline stage whose "
      "activation shape depends on its input, such as a different batch or sequence length)"};
  return v;
}

// Sends and recvs that met (both posted, alike) and never completed, with nothing else wrong in
// any exchange: no rank differs, the transport (or a device) is the suspect.
Verdict transport_verdict(const Job& job, const std::vector<Stalled>& stalled) {
  auto v =
      flight_verdict(job, verdict_ids::kP2pTransport,
                     "Sends and recvs met and never completed: the transport, not a rank", 0.6);
  std::set<int> ranks;
  for (const auto& s : stalled) {
    ranks.insert({s.sender, s.receiver});
    v.evidence.push_back("flight recorder, rank " + std::to_string(s.sender) + ": " +
                         s.send->describe() + "; rank " + std::to_string(s.receiver) + ": " +
                         s.recv->describe() + " (" + group_name(*s.group) + ")");
  }
  v.waiting_ranks = RankSet(std::vector<int>(ranks.begin(), ranks.end()));
  const auto& first = stalled.front();
  v.summary = "Rank " + std::to_string(first.sender) + "'s send to rank " +
              std::to_string(first.receiver) + " in " + group_name(*first.group) +
              " and its recv were both posted and never completed" +
              (stalled.size() > 1 ? " (and " + std::to_string(stalled.size() - 1) + " more pair(s))"
                                  : std::string()) +
              "; no rank failed to send or receive: the transport (network, NCCL, a GPU or "
              "link) is the suspect.";
  v.remedies = {
      "check the network and the GPUs of the ranks' nodes at the time of the timeout (NCCL logs "
      "with NCCL_DEBUG=INFO, link errors, Xid messages in the kernel log)"};
  return v;
}

}  // namespace

std::vector<Verdict> p2p_verdicts(const Job& job, const std::map<int, const FlightRecord*>& dumps) {
  Findings found;
  for (const auto& [key, channel] : channels_of(dumps)) match_channel(key, channel, found);
  std::vector<Verdict> out;
  for (const auto& m : found.mismatches) out.push_back(mismatch_verdict(job, m));
  auto unmatched = unmatched_verdicts(job, found.waits);
  out.insert(out.end(), unmatched.begin(), unmatched.end());
  if (out.empty() && !found.stalled.empty()) out.push_back(transport_verdict(job, found.stalled));
  return out;
}

}  // namespace hangscope::analysis

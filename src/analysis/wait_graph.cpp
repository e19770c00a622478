// The wait-for graph: who each waiting rank waits for, from what it waits in and the
// arguments of the waiting call (group ranks, peer, store keys) where the locals show them,
// else from the job's layout. Ranks that wait for nobody, work, or are stopped, dead,
// missing or in uninterruptible sleep are the graph's roots.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <unordered_map>

#include "hangscope/analysis/analysis.h"
#include "hangscope/common/numbers.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/model/store_keys.h"

namespace hangscope::analysis {
namespace {

// The locals that pass the group a call waits on: torch's and vLLM's argument names, and the
// group itself as `self` in its own methods.
const std::set<std::string> kGroupArguments = {
    "group", "pg", "process_group", "dp_group", "cpu_group", "device_group", "self"};

// Locals are reprs from a snapshot, of any length; those that name ranks are short. The regexes
// below recurse once per character (std::regex): longer texts are not parsed.
constexpr std::size_t kMaxParsed = 4096;

std::optional<int> parse_int(const std::optional<std::string>& text) {
  if (!text || text->size() > kMaxParsed) return std::nullopt;
  static const std::regex integer(R"(^\s*(-?\d+)\s*$)");
  std::smatch m;
  if (!std::regex_match(*text, m, integer)) return std::nullopt;
  return to_int(m[1].str());
}

// "[0, 1, 2, 3]" or "(0, 1)" → {0,1,2,3}; nullopt for anything else.
std::optional<std::vector<int>> parse_int_list(const std::optional<std::string>& text) {
  if (!text || text->size() > kMaxParsed) return std::nullopt;
  static const std::regex list(R"(^\s*[\[(]\s*(-?\d+\s*,\s*)*-?\d*\s*,?\s*[\])]\s*$)");
  if (!std::regex_match(*text, list)) return std::nullopt;
  std::vector<int> out;
  static const std::regex integer(R"(-?\d+)");
  for (auto it = std::sregex_iterator(text->begin(), text->end(), integer);
       it != std::sregex_iterator(); ++it) {
    const auto rank = to_int(it->str());
    if (!rank) return std::nullopt;  // not a list of ranks
    out.push_back(*rank);
  }
  return out;
}

// Ranks named by store keys: the path components that are integers ("arrive/3",
// "weights/5/ready").
std::set<int> ranks_named_by(const std::vector<std::string>& keys) {
  std::set<int> out;
  static const std::regex component(R"re((?:^|[/_:])(\d+)(?=$|[/_:]))re");
  for (const auto& key : keys) {
    if (key.size() > kMaxParsed) continue;  // the store client refuses such keys too
    for (auto c = std::sregex_iterator(key.begin(), key.end(), component);
         c != std::sregex_iterator(); ++c) {
      if (const auto rank = to_int((*c)[1].str())) out.insert(*rank);  // else: no rank
    }
  }
  return out;
}

// The same for a local's repr ("'arrive/3'", "['weights/5/ready', …]"); nullopt when it names
// no key.
std::optional<std::set<int>> ranks_in_keys(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const auto keys = model::keys_in_repr(*text);
  if (keys.empty()) return std::nullopt;
  return ranks_named_by(keys);
}

// Each rank's operation as a small number, so that "waits with me" is cheap at 30,000 ranks.
class Operations {
 public:
  explicit Operations(const Job& job) {
    std::unordered_map<std::string, int> ids;
    for (const auto& r : job.ranks) {
      const bool waiting = r.state == RankState::kWaiting && waits::waits_on_peers(r.wait.kind);
      // The same call on two groups is two operations: a TP all_reduce and a DP all_reduce
      // at one line of torch wait for different peers.
      std::string key;
      if (waiting) {
        const auto* group = awaited_group(r);
        key = r.wait.operation_key() + "@" + (group ? group->name : "");
      }
      id_.push_back(waiting ? ids.emplace(key, static_cast<int>(ids.size())).first->second : -1);
    }
    // The ranks in each operation (a rank's first entry decides, as Job::find does).
    std::unordered_map<int, std::vector<int>> members;
    for (const auto& [rank, index] : job.by_rank) {
      if (id_[index] >= 0) members[id_[index]].push_back(rank);
    }
    for (const auto& [op, ranks] : members) same_.emplace(op, RankSet(ranks));
  }
  // True when `peer` waits in the same operation as `self`.
  bool same(const Job& job, const RankEntry& peer, const RankEntry& self) const {
    const int a = id_[static_cast<std::size_t>(&peer - job.ranks.data())];
    const int b = id_[static_cast<std::size_t>(&self - job.ranks.data())];
    return a >= 0 && a == b;
  }

  // The ranks that wait in `self`'s operation (`self` among them; empty when it waits in none).
  const RankSet& with(const Job& job, const RankEntry& self) const {
    static const RankSet kNone;
    const auto it = same_.find(id_[static_cast<std::size_t>(&self - job.ranks.data())]);
    return it == same_.end() ? kNone : it->second;
  }

  // The job's ranks, present or missing, that are not in `self`'s operation, computed once per
  // operation: with the whole job as the group, every waiting rank needs this set.
  const RankSet& outside(const Job& job, const RankEntry& self) {
    const int op = id_[static_cast<std::size_t>(&self - job.ranks.data())];
    auto [it, added] = outside_.try_emplace(op);
    if (added) it->second = (job.present | job.missing) - with(job, self);
    return it->second;
  }

 private:
  std::vector<int> id_;
  std::unordered_map<int, RankSet> same_;
  std::unordered_map<int, RankSet> outside_;
};

// The ranks, in `job`, of the members of a group outside the registry that `self` waits in:
// in a group's job, its group ranks; in a torch job, the global ranks of the job's processes
// that hold the same group (the others are in another job: the group's own job links them).
// A StatelessProcessGroup's broadcast or receive waits for its `src` alone.
void link_outside_registry(const Job& job, const Operations& ops,
                           const model::ProcessGroupState& group, RankEntry& self) {
  const auto known = self.group_keys.find(group.name);
  const std::string key = known == self.group_keys.end() ? "" : known->second;
  if (job.group && key != job.key) return;  // it waits in another group: no edge here
  self.membership = "memory";
  self.group = key.empty() ? group.name : key;
  std::optional<int> peer;
  if (group.type == "StatelessProcessGroup") peer = parse_int(self.wait.local("src"));
  RankSet members;
  if (job.group) {
    members = peer ? RankSet{*peer} : RankSet::range(0, group.size - 1);
    self.waits_for_reason = "members of group " + self.group + " (" + group.type +
                            ", outside torch's registry), read from the process's memory";
  } else {
    // Group rank → this job's global rank, from the job's processes that hold the group.
    for (const auto& other : job.ranks) {
      const auto* p = other.latest();
      if (key.empty() || !other.rank || p == nullptr || !p->dump || !p->dump->distributed) {
        continue;
      }
      for (const auto& g : p->dump->distributed->groups) {
        if (g.registered || !g.group_rank || (peer && *g.group_rank != *peer)) continue;
        const auto it = other.group_keys.find(g.name);
        if (it != other.group_keys.end() && it->second == key) members.insert(*other.rank);
      }
    }
    self.waits_for_reason = "the job's processes that hold group " + self.group + " (" +
                            group.type + ", outside torch's registry)";
  }
  self.waits_for = members - ops.with(job, self);
  if (self.rank) self.waits_for.erase(*self.rank);
}

// The members of a collective, rendezvous or ring that are not in it with `self`.
void link_group_wait(const Job& job, Operations& ops, RankEntry& self) {
  RankSet members;
  const auto* group = awaited_group(self);
  if (group != nullptr && !group->registered) {
    link_outside_registry(job, ops, *group, self);
    return;
  }
  if (job.group) return;  // waits in no group of this job's: no edge here
  if (group != nullptr && (!group->ranks.empty() || group->size > 0)) {
    self.membership = "memory";
    self.group = group->name;
    self.waits_for_reason = "members of process group " + group->name +
                            (group->is_default ? " (the default group)" : "") +
                            ", read from the rank's memory";
    if (group->ranks.empty() && group->is_default) {
      // The default group (0..size-1) is the job: the job-wide set, computed once.
      self.waits_for = ops.outside(job, self) & RankSet::range(0, group->size - 1);
      if (self.rank) self.waits_for.erase(*self.rank);
      return;
    }
    // A group of 0..size-1 without its list is one range, whatever size memory gave.
    members = group->ranks.empty() ? RankSet::range(0, group->size - 1) : RankSet(group->ranks);
  } else if (auto listed = parse_int_list(self.wait.local("ranks"))) {
    members = RankSet(*listed);
    self.membership = "locals";
    self.waits_for_reason = "group ranks from the waiting frame's locals";
  } else if (auto group_ranks = parse_int_list(self.wait.local("group_ranks"))) {
    members = RankSet(*group_ranks);
    self.membership = "locals";
    self.waits_for_reason = "group ranks from the waiting frame's locals";
  } else {
    self.membership = "assumed";
    self.waits_for_reason = "group assumed to be the whole job";
    self.waits_for = ops.outside(job, self);
    if (self.rank) self.waits_for.erase(*self.rank);
    return;
  }
  // The members that are missing, outside the job or waiting elsewhere.
  self.waits_for = members - ops.with(job, self);
  if (self.rank) self.waits_for.erase(*self.rank);
}

void link_channel_wait(RankEntry& self) {
  std::optional<int> peer;
  for (const char* name : {"src", "dst", "peer", "src_rank", "dst_rank"}) {
    if ((peer = parse_int(self.wait.local(name)))) {
      self.waits_for_reason = std::string("peer from the local `") + name + "`";
      break;
    }
  }
  if (!peer) {
    self.waits_for_reason = "peer unknown (no locals)";
    return;
  }
  if (*peer != self.rank) self.waits_for.insert(*peer);
}

// The keys the rank's agent found missing in the store (--query-store); nullopt when the
// store was not asked.
std::optional<std::vector<std::string>> queried_missing_keys(const RankEntry& self) {
  const auto* process = self.latest();
  if (process == nullptr) return std::nullopt;
  const auto it = process->facts.find(model::fact_keys::kStoreMissingKeys);
  if (it == process->facts.end()) return std::nullopt;
  const auto keys = nlohmann::json::parse(it->second, nullptr, false);
  if (!keys.is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (k.is_string()) out.push_back(k.get<std::string>());
  }
  return out;
}

void link_store_wait(const Job& job, const Operations& ops, RankEntry& self) {
  // Asked of the store itself: the ranks named by the keys that do not exist yet.
  if (const auto missing = queried_missing_keys(self)) {
    self.waits_for_reason = missing->empty()
                                ? "every awaited key exists in the store (queried)"
                                : "ranks named in the awaited keys the store does not have "
                                  "(queried)";
    for (int r : ranks_named_by(*missing)) {
      if (r != self.rank && (job.find(r) != nullptr || !job.world_size || r < *job.world_size)) {
        self.waits_for.insert(r);
      }
    }
    return;
  }
  std::optional<std::set<int>> named;
  for (const char* name : {"keys", "key", "store_key", "keys_to_wait"}) {
    if ((named = ranks_in_keys(self.wait.local(name)))) {
      self.waits_for_reason = std::string("ranks named in the awaited keys (local `") + name + "`)";
      break;
    }
  }
  if (!named) {
    self.waits_for_reason = "awaited keys unknown";
    return;
  }
  // A rank at the same store wait has already set its key; the others have not.
  for (int r : *named) {
    if (r == self.rank) continue;
    const RankEntry* peer = job.find(r);
    if (peer == nullptr && job.world_size && r >= *job.world_size) continue;
    if (peer == nullptr || !ops.same(job, *peer, self)) self.waits_for.insert(r);
  }
}

// A vLLM broadcast ring whose state was read (fact shm_ring.*): the writer waits for the readers
// that have not read its blocks; a reader waits for the writer. False: no state to go by.
bool link_ring_wait(RankEntry& self) {
  const auto* process = self.latest();
  if (process == nullptr || !self.rank) return false;
  const auto writer = process->facts.find(model::fact_keys::kShmRingWriterRank);
  const auto lagging = process->facts.find(model::fact_keys::kShmRingLaggingRanks);
  if (writer == process->facts.end() || lagging == process->facts.end()) return false;
  const auto writer_rank = parse_int(writer->second);
  const auto behind = nlohmann::json::parse(lagging->second, nullptr, false);
  if (!writer_rank || !behind.is_array()) return false;
  self.waits_for_reason = "the broadcast ring's block flags in /dev/shm";
  if (*writer_rank == *self.rank) {
    std::vector<int> readers;
    for (const auto& r : behind) {
      if (r.is_number_integer() && r.get<int>() != *self.rank) readers.push_back(r.get<int>());
    }
    self.waits_for = RankSet(readers);
  } else {
    self.waits_for.insert(*writer_rank);
  }
  return true;
}

}  // namespace

const model::ProcessGroupState* awaited_group(const RankEntry& self) {
  const auto* process = self.latest();
  if (process == nullptr || !process->dump || !process->dump->distributed) return nullptr;
  const auto& state = *process->dump->distributed;
  // The group argument of the call it waits in, innermost frame first, whatever the argument
  // is called, or the group whose method it waits in (StatelessProcessGroup.broadcast_obj).
  for (const auto& frame : self.wait.frame_locals) {
    for (const auto& [name, value] : frame) {
      if (!kGroupArguments.count(name)) continue;
      const auto label = model::group_in_label(value);
      if (const auto* g = label ? state.find(*label) : nullptr) return g;
    }
  }
  const auto group = self.wait.local("group");
  // A process that holds the default group alone can wait in no other.
  if (!group && state.groups.size() == 1) return state.default_group();
  if (!group || *group == "None") {
    // No `group` argument in the waiting frames, or None: the default group. A frame with no
    // `group` local at all (a wrapper's own wait) is not taken for the default group.
    return group ? state.default_group() : nullptr;
  }
  const auto name = model::group_in_label(*group);
  return name ? state.find(*name) : nullptr;
}

void link_wait_graph(Job& job) {
  if (job.by_rank.empty()) job.index();
  Operations ops(job);
  for (auto& self : job.ranks) {
    self.waits_for = RankSet();
    self.membership.clear();
    self.group.clear();
    if (self.state != RankState::kWaiting || !waits::waits_on_peers(self.wait.kind)) continue;
    // Neither waiting nor progressing could be told: no edge rests on it.
    if (!self.progress.undecided.empty()) continue;
    switch (self.wait.kind) {
      case waits::WaitKind::kChannel:
        if (!job.group) link_channel_wait(self);
        break;
      case waits::WaitKind::kStore: {
        // A store wait inside a group's method (StatelessProcessGroup) waits on that group.
        const auto* group = awaited_group(self);
        if (group != nullptr && !group->registered) {
          link_outside_registry(job, ops, *group, self);
        } else if (!job.group) {
          link_store_wait(job, ops, self);
        }
        break;
      }
      case waits::WaitKind::kRing:
        if (job.group || !link_ring_wait(self)) link_group_wait(job, ops, self);
        break;
      default:
        link_group_wait(job, ops, self);
        break;
    }
  }
}

void assign_classes(Job& job) {
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < job.ranks.size(); ++i) {
    const auto& r = job.ranks[i];
    if (r.history.empty()) continue;  // missing or unknown: in no class
    const std::string key = std::string(to_string(r.state)) + "|" + r.wait.class_key();
    groups[key].push_back(i);
  }
  std::vector<std::pair<std::string, std::vector<std::size_t>>> ordered(groups.begin(),
                                                                        groups.end());
  std::stable_sort(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) {
    if (a.second.size() != b.second.size()) return a.second.size() > b.second.size();
    return a.second.front() < b.second.front();
  });
  job.classes.clear();
  for (const auto& [key, members] : ordered) {
    RankClass c;
    c.id = static_cast<int>(job.classes.size()) + 1;
    c.key = key;
    c.representative = members.front();
    const auto& first = job.ranks[members.front()];
    c.state = std::string(to_string(first.state));
    c.description = first.wait.describe();
    for (auto i : members) {
      job.ranks[i].class_id = c.id;
      if (job.ranks[i].rank) c.ranks.push_back(*job.ranks[i].rank);
    }
    job.classes.push_back(std::move(c));
  }
}

}  // namespace hangscope::analysis

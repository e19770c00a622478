#include "stateless_order.h"

#include <map>
#include <optional>
#include <regex>
#include <set>

#include "hangscope/common/numbers.h"
#include "hangscope/model/store_keys.h"

namespace hangscope::analysis {
namespace {

// The group a member of `job` holds (the one whose key is the job's).
const model::ProcessGroupState* held_group(const Job& job, const RankEntry& e) {
  const auto* p = e.latest();
  if (p == nullptr || !p->dump || !p->dump->distributed) return nullptr;
  for (const auto& g : p->dump->distributed->groups) {
    const auto key = e.group_keys.find(g.name);
    if (key != e.group_keys.end() && key->second == job.key) return &g;
  }
  return nullptr;
}

// An awaited object: who sends it, the counter that counts its sends, and its number.
struct Awaited {
  int source = 0;
  std::string counter;  // "broadcast_send" | "send_dst/R"
  std::int64_t number = 0;
  std::string key;
  auto operator<=>(const Awaited&) const = default;
};

// broadcast_from/{src}/{n} (a broadcast), send_to/{dst}/{n} (a recv_obj, from its `src`).
std::optional<Awaited> awaited_object(const RankEntry& e) {
  const auto text = e.wait.local("key");
  if (!text) return std::nullopt;
  const auto keys = model::keys_in_repr(*text);
  if (keys.empty()) return std::nullopt;
  static const std::regex broadcast(R"(^broadcast_from/(\d+)/(\d+)$)");
  static const std::regex sent(R"(^send_to/(\d+)/(\d+)$)");
  std::smatch m;
  const std::string& key = keys.front();
  if (std::regex_match(key, m, broadcast)) {
    const auto src = to_int(m[1].str());
    const auto n = to_int(m[2].str());
    if (src && n) return Awaited{*src, "broadcast_send", *n, key};
  } else if (std::regex_match(key, m, sent)) {
    const auto dst = to_int(m[1].str());
    const auto n = to_int(m[2].str());
    const auto src = to_int(e.wait.local("src").value_or(""));
    if (dst && n && src) return Awaited{*src, "send_dst/" + m[1].str(), *n, key};
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> stateless_order_evidence(const Job& job, const RankSet& waiting) {
  std::vector<std::string> out;
  if (!job.group || job.group->type != "StatelessProcessGroup") return out;
  std::map<Awaited, std::set<int>> waiters;
  for (const auto* e : job.entries_in(waiting)) {
    if (const auto a = awaited_object(*e)) waiters[*a].insert(*e->rank);
  }
  for (const auto& [a, ranks] : waiters) {
    const std::string who = job.group->noun() + " " + std::to_string(a.source);
    const RankSet set(std::vector<int>(ranks.begin(), ranks.end()));
    const std::string waiting_ranks =
        job.group->noun() + (ranks.size() == 1 ? " " : "s ") + set.text();
    const auto* source = job.find(a.source);
    const auto* group = source != nullptr ? held_group(job, *source) : nullptr;
    std::optional<std::int64_t> count;
    if (group != nullptr) {
      if (const auto it = group->counters.find(a.counter); it != group->counters.end()) {
        count = it->second;
      }
    }
    if (!count) {
      out.push_back(waiting_ranks + " wait for " + a.key + " from " + who +
                    ", whose counters were not read");
      continue;
    }
    const std::string sent =
        who + " has sent " + std::to_string(*count) + " (" + a.counter + " counter)";
    out.push_back(*count <= a.number
                      ? sent + ": it has not reached " + a.key + ", which " + waiting_ranks +
                            " wait for"
                      : sent + ": it sent " + a.key + " already, which " + waiting_ranks +
                            " still wait for (an expired key, or another store)");
  }
  return out;
}

}  // namespace hangscope::analysis

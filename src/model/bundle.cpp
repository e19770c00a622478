#include "hangscope/model/bundle.h"

#include <set>

#include "name_table.h"

namespace hangscope::model {
namespace {

constexpr names::Table<NodeState, 5> kNodeStateNames = {{
    {NodeState::kOk, "ok"},
    {NodeState::kUnreachable, "unreachable"},
    {NodeState::kRefused, "refused"},
    {NodeState::kBusy, "busy"},
    {NodeState::kError, "error"},
}};

}  // namespace

std::string_view to_string(NodeState state) {
  return names::name_in(kNodeStateNames, state, "error");
}

NodeState parse_node_state(std::string_view name) {
  return names::value_in(kNodeStateNames, name, NodeState::kError);
}

Bundle assemble_bundle(std::vector<NodeAnswer> answers, std::vector<std::string>* renamed) {
  std::map<std::string, std::size_t> uses;  // name → answers giving it
  for (const auto& a : answers) ++uses[a.status.name];
  std::set<std::string> taken;
  for (const auto& a : answers) {
    if (uses[a.status.name] == 1) taken.insert(a.status.name);
  }
  Bundle bundle;
  for (auto& a : answers) {
    auto& status = a.status;
    if (uses[status.name] > 1) {
      const std::string given = status.name;
      const std::string source = a.source.empty() ? "?" : a.source;
      std::string name = given + "@" + source;
      for (int k = 2; !taken.insert(name).second; ++k) {
        name = given + "@" + source + "#" + std::to_string(k);
      }
      const std::string note = "node name '" + given + "' is given by " +
                               std::to_string(uses[given]) + " agents or files: this one (" +
                               source + ") is named " + name;
      for (auto& s : a.samples) s.notes.push_back(note);
      if (renamed != nullptr) renamed->push_back(note);
      status.name = std::move(name);
    }
    for (auto& s : a.samples) {
      s.node_name = status.name;
      bundle.snapshots.push_back(std::move(s));
    }
    bundle.nodes.push_back(std::move(status));
  }
  return bundle;
}

std::map<std::string, const NodeSnapshot*> latest_samples(const Bundle& bundle) {
  std::map<std::string, const NodeSnapshot*> latest;
  for (const auto& s : bundle.snapshots) {
    auto& slot = latest[s.node_name];
    if (slot == nullptr || s.sample_index >= slot->sample_index) slot = &s;
  }
  return latest;
}

}  // namespace hangscope::model

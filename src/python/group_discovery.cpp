#include "hangscope/python/group_discovery.h"

#include <array>
#include <cstring>

#include "c10d_objects.h"

namespace hangscope::python {
namespace {

constexpr int kMaxGroupSize = 1 << 24;
// The search of a frame's `self` for the groups it holds: attributes of attributes, bounded.
constexpr int kAttributeDepth = 3;
constexpr std::size_t kAttributesPerObject = 48;
constexpr std::size_t kObjectsSearched = 128;

constexpr std::array<std::string_view, 9> kGroupTypes = {
    "ProcessGroup",         "ProcessGroupGloo",    "ProcessGroupNCCL",
    "ProcessGroupMPI",      "ProcessGroupUCC",     "ProcessGroupXCCL",
    "_ProcessGroupWrapper", "ProcessGroupWrapper", "StatelessProcessGroup"};

// Objects whose attributes hold no process group: values, containers, code and I/O.
constexpr std::array<std::string_view, 22> kOpaqueTypes = {
    "str",       "int",
    "float",     "bool",
    "NoneType",  "bytes",
    "list",      "tuple",
    "dict",      "set",
    "frozenset", "function",
    "method",    "type",
    "module",    "code",
    "Tensor",    "Parameter",
    "ndarray",   "Thread",
    "socket",    "builtin_function_or_method"};

std::string unqualified_type(std::string_view type_name) {
  const auto dot = type_name.rfind('.');
  return std::string(dot == std::string_view::npos ? type_name : type_name.substr(dot + 1));
}

}  // namespace

std::optional<std::string> GroupDiscovery::group_type(std::string_view type_name) {
  const std::string type = unqualified_type(type_name);
  for (const auto known : kGroupTypes) {
    if (type == known) return type;
  }
  return std::nullopt;
}

void GroupDiscovery::local(std::string_view name, std::uint64_t object, ObjectReader& objects) {
  const auto type_name = objects.type_name(object);
  if (!type_name) return;
  if (const auto type = group_type(*type_name)) {
    consider(object, *type, std::string(name), objects);
  } else if (name == "self") {
    search_attributes(object, "self", kAttributeDepth, objects);
  }
}

void GroupDiscovery::search_attributes(std::uint64_t object, const std::string& path, int depth,
                                       ObjectReader& objects) {
  if (depth == 0 || searched_.size() >= kObjectsSearched || !searched_.insert(object).second) {
    return;
  }
  for (const auto& [key, value] : objects.attributes(object, kAttributesPerObject)) {
    const auto type_name = objects.type_name(value);
    if (!type_name) continue;
    const auto attribute = objects.string(key, 64);
    if (!attribute) continue;
    const std::string here = path + "." + *attribute;
    if (const auto type = group_type(*type_name)) {
      consider(value, *type, here, objects);
      continue;
    }
    const std::string type = unqualified_type(*type_name);
    bool opaque = false;
    for (const auto t : kOpaqueTypes) opaque = opaque || type == t;
    if (!opaque) search_attributes(value, here, depth - 1, objects);
  }
}

void GroupDiscovery::consider(std::uint64_t object, const std::string& type,
                              const std::string& held_by, ObjectReader& objects) {
  if (found_.count(object) || registry_stores_.count(object)) return;
  if (labels_.count(object)) {  // a registry group: only its store is new
    registry_stores_[object] = StoreChain{};
    if (const auto value = c10d::held_value(objects, object)) store_held_by(object, *value);
    return;
  }
  auto group = type == "StatelessProcessGroup" ? read_stateless_group(object, objects)
                                               : read_torch_group(object, objects);
  if (!group) return;
  group->registered = false;
  group->type = type;
  group->held_by = held_by;
  group->address = object;
  group->name = "pg@" + std::to_string(object);
  labels_[object] = model::group_label(group->name);
  found_.emplace(object, std::move(*group));
}

void GroupDiscovery::store_held_by(std::uint64_t object, std::uint64_t cpp_object) {
  store_holders_[object] = cpp_object;
}

void GroupDiscovery::read_stores(ObjectReader& objects) {
  if (store_holders_.empty()) return;
  if (!stores_) stores_ = TorchStoreReader::locate(image_);
  for (const auto& [object, cpp_object] : store_holders_) {
    const auto chain = stores_->chain_of(objects, cpp_object);
    if (!chain) continue;
    if (const auto it = registry_stores_.find(object); it != registry_stores_.end()) {
      it->second = *chain;
    } else if (const auto found = found_.find(object); found != found_.end()) {
      found->second.store = chain->address();
      found->second.store_prefixes = chain->prefixes;
    }
  }
  store_holders_.clear();
}

std::optional<model::ProcessGroupState> GroupDiscovery::read_torch_group(std::uint64_t object,
                                                                         ObjectReader& objects) {
  for (const bool indirect : {false, true}) {
    const auto value = c10d::held_value(objects, object, indirect);
    if (!value) continue;
    std::array<std::int32_t, 2> rank_size{};
    if (!objects.read(*value + c10d::kRankOffset, rank_size.data(), sizeof rank_size)) continue;
    const auto [rank, size] = rank_size;
    if (size < 1 || size > kMaxGroupSize || rank < 0 || rank >= size) continue;
    model::ProcessGroupState group;
    group.size = size;
    group.group_rank = rank;
    store_held_by(object, *value);
    return group;
  }
  return std::nullopt;
}

namespace {

// A StatelessProcessGroup's counters (its program order): the int broadcast_send_counter and
// the per-peer dicts of objects sent, received and broadcasts received.
void read_counters(std::uint64_t object, ObjectReader& objects, model::ProcessGroupState& group) {
  constexpr std::size_t kPeers = 1024;
  if (const auto sent = objects.attribute(object, "broadcast_send_counter")) {
    if (const auto n = objects.small_int(*sent)) group.counters["broadcast_send"] = *n;
  }
  for (const auto& [attribute, name] :
       {std::pair{"send_dst_counter", "send_dst/"}, std::pair{"recv_src_counter", "recv_src/"},
        std::pair{"broadcast_recv_src_counter", "broadcast_recv_src/"}}) {
    const auto dict = objects.attribute(object, attribute);
    if (!dict || objects.type_name(*dict) != "dict") continue;
    for (const auto& [peer, count] : objects.dict_items(*dict, kPeers)) {
      const auto p = objects.small_int(peer);
      const auto c = objects.small_int(count);
      if (p && c) group.counters[std::string(name) + std::to_string(*p)] = *c;
    }
  }
}

}  // namespace

// vLLM's StatelessProcessGroup (vllm/distributed/utils.py), a dataclass: rank, world_size and
// the torch TCPStore it exchanges objects through.
std::optional<model::ProcessGroupState> GroupDiscovery::read_stateless_group(
    std::uint64_t object, ObjectReader& objects) {
  const auto rank = objects.attribute(object, "rank");
  const auto size = objects.attribute(object, "world_size");
  // -1 and 0 for what could not be read: refused below (no optional read past its check, which
  // GCC's TSan build cannot follow).
  const int r = (rank ? objects.small_int(*rank) : std::nullopt).value_or(-1);
  const int n = (size ? objects.small_int(*size) : std::nullopt).value_or(0);
  if (n < 1 || n > kMaxGroupSize || r < 0 || r >= n) return std::nullopt;
  model::ProcessGroupState group;
  group.size = n;
  group.group_rank = r;
  group.backend = "store";
  read_counters(object, objects, group);
  if (const auto store = objects.attribute(object, "store")) {
    if (const auto value = c10d::held_value(objects, *store)) store_held_by(object, *value);
  }
  return group;
}

void GroupDiscovery::add_to(model::DistributedState& state) const {
  for (auto& g : state.groups) {
    const auto it = registry_stores_.find(g.address);
    if (it == registry_stores_.end() || !g.store.empty()) continue;
    g.store = it->second.address();
    g.store_prefixes = it->second.prefixes;
  }
  for (const auto& [object, group] : found_) {
    bool known = false;
    for (const auto& g : state.groups) known = known || g.address == object;
    if (!known) state.groups.push_back(group);
  }
}

}  // namespace hangscope::python

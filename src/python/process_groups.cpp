#include "hangscope/python/process_groups.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "c10d_objects.h"
#include "hangscope/waits/frameworks.h"

namespace hangscope::python {
namespace {

constexpr std::size_t kMaxGroups = 4096;

constexpr std::size_t kNativeBytes = ProcessGroupReader::kNativeObjectBytes;
// Other layouts than torch 1.13's (c10d_objects.h) are searched (read_native_groups).

// torch.distributed's registry of groups (read_registry); the frameworks' own modules are in
// their tables (waits::GroupModule).
constexpr std::string_view kTorchRegistryModule = "torch.distributed.distributed_c10d";

// The label of a framework's group: "vllm:tp".
std::string framework_label(std::string_view framework, std::string_view dimension) {
  return std::string(framework) + ":" + std::string(dimension);
}

std::int32_t int_at(const std::array<std::byte, kNativeBytes>& bytes, std::size_t offset) {
  std::int32_t value = 0;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

void add_label(model::ProcessGroupState& group, const std::string& label) {
  if (std::find(group.labels.begin(), group.labels.end(), label) == group.labels.end()) {
    group.labels.push_back(label);
  }
}

}  // namespace

std::optional<std::string> ProcessGroupReader::text(std::uint64_t object, std::size_t max) {
  return objects_.string(object, max);
}

// The modules read, found in one pass over sys.modules (a torch process imports thousands):
// the keys are read in one batch and compared without being decoded (ObjectReader::find_modules).
// torch's registry, then every framework table's group modules.
const std::vector<std::string_view>& ProcessGroupReader::modules_read() {
  static const std::vector<std::string_view> modules = [] {
    std::vector<std::string_view> out = {kTorchRegistryModule};
    for (const auto* framework : waits::frameworks()) {
      for (const auto& groups : framework->group_modules) out.push_back(groups.module);
    }
    return out;
  }();
  return modules;
}

std::optional<std::uint64_t> ProcessGroupReader::module_globals(std::string_view module) {
  if (!modules_) modules_ = objects_.find_modules(runtime_, modules_read());
  const auto found = modules_->find(std::string(module));
  if (found == modules_->end() || !objects_.plausible(found->second)) return std::nullopt;
  const auto globals = objects_.read_field(found->second, layout_.module_dict);
  if (!globals || !objects_.plausible(*globals)) return std::nullopt;
  return globals;
}

// torch 2.x: `_world._default_pg`; torch 1.13: the class attribute `GroupMember.WORLD`.
std::optional<std::uint64_t> ProcessGroupReader::default_group(std::uint64_t globals,
                                                               std::string& registry) {
  if (const auto world = objects_.dict_get(globals, "_world")) {
    registry = "torch-2";
    const auto pg = objects_.attribute(*world, "_default_pg");
    if (pg && objects_.type_name(*pg) != "NoneType") return pg;
    return std::nullopt;
  }
  registry = "torch-1.13";
  for (const char* holder : {"GroupMember", "group"}) {
    const auto cls = objects_.dict_get(globals, holder);
    if (!cls) continue;
    const auto pg = objects_.class_attribute(*cls, "WORLD");
    if (pg && objects_.type_name(*pg) != "NoneType") return pg;
  }
  return std::nullopt;
}

model::ProcessGroupState* ProcessGroupReader::group_at(model::DistributedState& state,
                                                       std::uint64_t object) {
  for (auto& g : state.groups) {
    if (g.address == object) return &g;
  }
  return nullptr;
}

void ProcessGroupReader::read_registry(std::uint64_t globals, model::DistributedState& state) {
  const auto default_pg = default_group(globals, state.registry);
  const auto ranks_dict = objects_.dict_get(globals, "_pg_group_ranks");
  if (!ranks_dict) {
    state.notes.push_back("torch.distributed: no _pg_group_ranks in distributed_c10d");
    return;
  }
  // Keys hash by address: the registry's dicts are walked and matched by pointer.
  for (const auto& [pg, mapping] : objects_.dict_items(*ranks_dict, kMaxGroups)) {
    if (objects_.type_name(pg) == "object") continue;  // GroupMember.NON_GROUP_MEMBER
    std::vector<std::pair<int, int>> by_group_rank;    // (group rank, global rank)
    for (const auto& [global, local] : objects_.dict_items(mapping, 1 << 17)) {
      const auto g = objects_.small_int(global);
      const auto l = objects_.small_int(local);
      if (g && l && *g >= 0 && *l >= 0) by_group_rank.emplace_back(*l, *g);
    }
    std::sort(by_group_rank.begin(), by_group_rank.end());
    model::ProcessGroupState group;
    group.address = pg;
    group.is_default = default_pg && *default_pg == pg;
    for (const auto& [local, global] : by_group_rank) group.ranks.push_back(global);
    group.size = static_cast<int>(group.ranks.size());
    state.groups.push_back(std::move(group));
  }
  if (const auto names = objects_.dict_get(globals, "_pg_names")) {
    for (const auto& [pg, name] : objects_.dict_items(*names, kMaxGroups)) {
      if (auto* group = group_at(state, pg)) group->name = text(name).value_or("");
    }
  }
  if (const auto map = objects_.dict_get(globals, "_pg_map")) {
    for (const auto& [pg, entry] : objects_.dict_items(*map, kMaxGroups)) {
      auto* group = group_at(state, pg);
      const auto items = objects_.sequence_items(entry, 2);
      if (group && items && !items->empty()) group->backend = text((*items)[0], 32).value_or("");
    }
  }
  for (auto& g : state.groups) {
    if (g.name.empty()) g.name = g.is_default ? "0" : "pg@" + std::to_string(g.address);
    if (g.is_default) state.world_size = static_cast<int>(g.ranks.size());
  }
  if (default_pg && !group_at(state, *default_pg)) {
    state.notes.push_back("torch.distributed: the default group is not in _pg_group_ranks yet");
  }
  if (const auto method = objects_.dict_get(globals, "_default_pg_init_method")) {
    state.init_method = text(*method, 512).value_or("");
  }
}

// The process's own rank from the C++ ProcessGroup of each group: the offset of (rank, size)
// must hold for every group at once, each size must be the registry's, and every group must
// map its rank back to the same global rank. torch 1.13's offset is tried first.
void ProcessGroupReader::read_native_groups(model::DistributedState& state) {
  struct Native {
    model::ProcessGroupState* group;
    std::array<std::byte, kNativeBytes> bytes;
  };
  std::vector<Native> natives;
  for (auto& g : state.groups) {
    if (g.ranks.empty() || g.address == 0) continue;
    for (bool indirect : {false, true}) {
      const auto value = c10d::held_value(objects_, g.address, indirect);
      if (!value) continue;
      Native native{&g, {}};
      if (!objects_.read(*value, native.bytes.data(), native.bytes.size())) continue;
      natives.push_back(native);
      break;
    }
  }
  if (natives.empty()) {
    if (!state.groups.empty()) {
      state.notes.push_back("torch.distributed: no group's C++ ProcessGroup could be read");
    }
    return;
  }
  const auto fits = [&](std::size_t offset) -> std::optional<int> {
    std::optional<int> global;
    for (const auto& n : natives) {
      const std::int32_t rank = int_at(n.bytes, offset);
      const std::int32_t size = int_at(n.bytes, offset + 4);
      if (size != static_cast<std::int32_t>(n.group->ranks.size()) || rank < 0 || rank >= size) {
        return std::nullopt;
      }
      const int mine = n.group->ranks[static_cast<std::size_t>(rank)];
      if (global && *global != mine) return std::nullopt;
      global = mine;
    }
    return global;
  };
  std::vector<std::size_t> offsets = {c10d::kRankOffset};
  for (std::size_t o = 8; o + 8 <= kNativeBytes; o += 4) {
    if (o != c10d::kRankOffset) offsets.push_back(o);
  }
  for (const std::size_t offset : offsets) {
    const auto global = fits(offset);
    if (!global) continue;
    state.rank = global;
    for (auto& n : natives) n.group->group_rank = int_at(n.bytes, offset);
    if (offset != c10d::kRankOffset) {
      state.notes.push_back("torch.distributed: rank and size found at offset " +
                            std::to_string(offset) +
                            " of the C++ ProcessGroup (not torch 1.13's), checked over " +
                            std::to_string(natives.size()) + " group(s)");
      return;  // the sequence number's place is known for torch 1.13 only
    }
    for (auto& n : natives) {
      std::uint64_t sequence = 0;
      std::memcpy(&sequence, n.bytes.data() + c10d::kSequenceOffset, sizeof sequence);
      if (static_cast<std::uint8_t>(n.bytes[c10d::kSequenceFlagOffset]) == 1 && sequence != 0) {
        n.group->sequence = sequence;
      }
      n.group->timeout_ms = collective_timeout(n.bytes, n.group->backend);
    }
    return;
  }
  state.notes.push_back(
      "torch.distributed: this process's rank was not found in its C++ ProcessGroup(s)");
}

std::size_t ProcessGroupReader::refresh_sequences(ObjectReader& objects,
                                                  model::DistributedState& state) {
  std::size_t read = 0;
  for (auto& g : state.groups) {
    if (!g.sequence || g.address == 0) continue;
    for (const bool indirect : {false, true}) {
      const auto value = c10d::held_value(objects, g.address, indirect);
      if (!value) continue;
      std::array<std::byte, c10d::kSequenceOffset + sizeof(std::uint64_t)> bytes{};
      if (!objects.read(*value, bytes.data(), bytes.size())) continue;
      std::uint64_t sequence = 0;
      std::memcpy(&sequence, bytes.data() + c10d::kSequenceOffset, sizeof sequence);
      if (static_cast<std::uint8_t>(bytes[c10d::kSequenceFlagOffset]) != 1 ||
          sequence < *g.sequence) {
        continue;  // not this layout (or not this object any more): try the other holder
      }
      g.sequence = sequence;
      ++read;
      break;
    }
  }
  return read;
}

// The group's collective timeout from its backend's options (c10d_objects.h): the pointer at
// torch 1.13 gloo's place first, then any pointer of the object's first bytes whose target holds
// a timeout of at most a week and the group's own backend name as a std::string right after it.
std::optional<std::int64_t> ProcessGroupReader::collective_timeout(
    const std::array<std::byte, kNativeBytes>& native, const std::string& backend) {
  if (backend.empty() || backend.size() > 15) return std::nullopt;  // a short string's buffer
  constexpr std::int64_t kWeekMs = 7LL * 24 * 3600 * 1000;
  std::vector<std::size_t> places = {c10d::kGlooOptionsPointer};
  for (std::size_t o = 8; o + 8 <= kNativeBytes; o += 8) {
    if (o != c10d::kGlooOptionsPointer) places.push_back(o);
  }
  for (const std::size_t place : places) {
    std::uint64_t options = 0;
    std::memcpy(&options, native.data() + place, sizeof options);
    if (!objects_.plausible(options)) continue;
    std::array<std::byte, c10d::kOptionsBackend + 32> bytes{};
    if (!objects_.read(options, bytes.data(), bytes.size())) continue;
    std::int64_t timeout = 0;
    std::uint64_t data = 0, size = 0;
    std::memcpy(&timeout, bytes.data() + c10d::kOptionsTimeout, sizeof timeout);
    std::memcpy(&data, bytes.data() + c10d::kOptionsBackend, sizeof data);
    std::memcpy(&size, bytes.data() + c10d::kOptionsBackend + 8, sizeof size);
    if (timeout <= 0 || timeout > kWeekMs || size != backend.size() ||
        data != options + c10d::kOptionsBackend + 16) {
      continue;
    }
    if (std::memcmp(bytes.data() + c10d::kOptionsBackend + 16, backend.data(), size) != 0) {
      continue;
    }
    return timeout;
  }
  return std::nullopt;
}

// A framework's group coordinators (vLLM's and SGLang's GroupCoordinator): the parallel
// dimension of its torch groups, the rank in it, and the groups torch's registry does not hold
// (stateless groups).
void ProcessGroupReader::read_coordinators(std::string_view framework,
                                           const waits::GroupModule& groups, std::uint64_t globals,
                                           model::DistributedState& state) {
  const auto& fields = *groups.coordinator;
  for (const auto& global : groups.globals) {
    const auto coordinator = objects_.dict_get(globals, global.name);
    if (!coordinator || objects_.type_name(*coordinator) == "NoneType") continue;
    const std::string label = framework_label(framework, global.dimension);
    const auto rank_in_group = [&]() -> std::optional<int> {
      const auto value = objects_.attribute(*coordinator, fields.rank_in_group);
      return value ? objects_.small_int(*value) : std::nullopt;
    }();
    if (rank_in_group && global.dimension != "world") {
      state.coordinates.emplace(global.dimension, *rank_in_group);
    }
    bool registered = false;
    for (const auto member : fields.torch_groups) {
      const auto pg = objects_.attribute(*coordinator, member);
      if (!pg) continue;
      if (auto* group = group_at(state, *pg)) {
        add_label(*group, label);
        registered = true;
      }
    }
    if (registered) continue;
    // Not in torch's registry: the coordinator's own list of ranks.
    const auto ranks = objects_.attribute(*coordinator, fields.ranks);
    const auto items = ranks ? objects_.sequence_items(*ranks, 1 << 17) : std::nullopt;
    if (!items) continue;
    model::ProcessGroupState group;
    for (auto item : *items) {
      if (const auto r = objects_.small_int(item)) group.ranks.push_back(*r);
    }
    const auto unique = objects_.attribute(*coordinator, fields.unique_name);
    group.name = (unique ? text(*unique, 128) : std::nullopt).value_or(label);
    group.size = static_cast<int>(group.ranks.size());
    group.group_rank = rank_in_group;
    group.labels.push_back(label);
    group.address = *coordinator;
    state.groups.push_back(std::move(group));
  }
}

// A framework's module globals that are torch groups themselves (Megatron's parallel_state).
void ProcessGroupReader::read_plain_groups(std::string_view framework,
                                           const waits::GroupModule& groups, std::uint64_t globals,
                                           model::DistributedState& state) {
  for (const auto& global : groups.globals) {
    const auto pg = objects_.dict_get(globals, global.name);
    if (!pg) continue;
    if (auto* group = group_at(state, *pg)) {
      add_label(*group, framework_label(framework, global.dimension));
      if (group->group_rank) state.coordinates.emplace(global.dimension, *group->group_rank);
    }
  }
}

std::optional<model::DistributedState> ProcessGroupReader::read() {
  const auto c10d = module_globals(kTorchRegistryModule);
  if (!c10d) return std::nullopt;
  model::DistributedState state;
  read_registry(*c10d, state);
  read_native_groups(state);
  // The frameworks' groups, in the tables' order (a dimension's first coordinate is kept).
  for (const auto* framework : waits::frameworks()) {
    for (const auto& groups : framework->group_modules) {
      const auto globals = module_globals(groups.module);
      if (!globals) continue;
      if (groups.coordinator) {
        read_coordinators(framework->name, groups, *globals, state);
      } else {
        read_plain_groups(framework->name, groups, *globals, state);
      }
    }
  }
  // A coordinator's rank list gives the global rank when no C++ group could be read.
  if (!state.rank) {
    for (const auto& g : state.groups) {
      if (g.group_rank && *g.group_rank >= 0 &&
          static_cast<std::size_t>(*g.group_rank) < g.ranks.size()) {
        state.rank = g.ranks[static_cast<std::size_t>(*g.group_rank)];
        break;
      }
    }
  }
  return state;
}

std::map<std::uint64_t, std::string> ProcessGroupReader::labels(
    const model::DistributedState& state) {
  std::map<std::uint64_t, std::string> out;
  for (const auto& g : state.groups) {
    if (g.address != 0) out.emplace(g.address, model::group_label(g.name));
  }
  return out;
}

}  // namespace hangscope::python

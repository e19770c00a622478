// torch.distributed's process groups read from a rank's memory, without running code in it:
// torch's registry (distributed_c10d: the default group, _pg_group_ranks, _pg_names, _pg_map),
// each group's C++ ProcessGroup behind its pybind11 holder (the process's own rank in it, the
// group size, the sequence number of its collectives), and the frameworks' modules that say what
// a group is for (vLLM's and SGLang's GroupCoordinator, Megatron's parallel_state: where each
// keeps its groups is in its framework table, waits/frameworks.h). docs/analysis.md,
// "Membership", says what is read where.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hangscope/model/process_dump.h"
#include "hangscope/python/objects.h"

namespace hangscope::waits {
struct GroupModule;  // waits/frameworks.h: a framework's module of group globals
}  // namespace hangscope::waits

namespace hangscope::python {

class ProcessGroupReader {
 public:
  // The bytes of a C++ ProcessGroup searched for its rank, size and options.
  static constexpr std::size_t kNativeObjectBytes = 256;

  // `modules`: sys.modules' entries for modules_read() when the caller found them already
  // (with others, in one walk); they are looked up otherwise.
  ProcessGroupReader(ObjectReader& objects, std::uint64_t runtime_address,
                     std::optional<std::map<std::string, std::uint64_t>> modules = std::nullopt)
      : objects_(objects),
        layout_(objects.layout()),
        runtime_(runtime_address),
        modules_(std::move(modules)) {}

  // The modules read: torch.distributed's and the framework tables' group modules (vLLM, SGLang,
  // Megatron).
  static const std::vector<std::string_view>& modules_read();

  // nullopt when torch.distributed was never imported; a state with no groups when it was but
  // no default group exists yet (before or inside init_process_group).
  std::optional<model::DistributedState> read();

  // Object address → label, for the locals of frames (ObjectReader::set_labels).
  static std::map<std::uint64_t, std::string> labels(const model::DistributedState& state);

  // The sequence numbers of `state`'s groups read again from their C++ ProcessGroups (each
  // group's `address`), for the groups whose number an earlier read() found (torch 1.13's
  // layout): a few bytes per group, no registry walk. A group that cannot be read again keeps
  // its number; returns how many were read.
  static std::size_t refresh_sequences(ObjectReader& objects, model::DistributedState& state);

 private:
  std::optional<std::uint64_t> module_globals(std::string_view module);
  std::optional<std::string> text(std::uint64_t object, std::size_t max = 256);
  void read_registry(std::uint64_t globals, model::DistributedState& state);
  std::optional<std::uint64_t> default_group(std::uint64_t globals, std::string& registry);
  void read_native_groups(model::DistributedState& state);
  std::optional<std::int64_t> collective_timeout(
      const std::array<std::byte, kNativeObjectBytes>& native, const std::string& backend);
  void read_coordinators(std::string_view framework, const waits::GroupModule& groups,
                         std::uint64_t globals, model::DistributedState& state);
  void read_plain_groups(std::string_view framework, const waits::GroupModule& groups,
                         std::uint64_t globals, model::DistributedState& state);
  model::ProcessGroupState* group_at(model::DistributedState& state, std::uint64_t object);

  ObjectReader& objects_;
  const Layout& layout_;
  std::uint64_t runtime_;
  // The wanted modules by name (sys.modules walked once), empty when none is imported.
  std::optional<std::map<std::string, std::uint64_t>> modules_;
};

}  // namespace hangscope::python

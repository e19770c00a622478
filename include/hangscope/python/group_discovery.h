// Process groups found where a process uses them rather than in torch's registry: a frame's
// local (the group argument of the call a rank waits in) or an attribute of a frame's `self`
// (an engine core's dp_group, a client's communicator.group), with the store each was made on.
// docs/analysis.md, "Groups outside the registry".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "hangscope/elf/process_image.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/python/objects.h"
#include "hangscope/python/stack_reader.h"
#include "hangscope/python/torch_stores.h"

namespace hangscope::python {

class GroupDiscovery : public LocalsObserver {
 public:
  // `labels`: the registry's groups by object (ProcessGroupReader::labels); groups found are
  // added to it so that the locals naming them show as "<process group NAME>".
  // `image`: where libtorch's store classes are looked up, the first time a group is met.
  GroupDiscovery(elf::ProcessImage& image, std::map<std::uint64_t, std::string>& labels)
      : image_(image), labels_(labels) {}

  void local(std::string_view name, std::uint64_t object, ObjectReader& objects) override;

  // The stores of the groups found (their chains, from the C++ objects remembered when each was
  // met), read now: locating libtorch's store classes opens and searches its symbol table, which
  // must not happen while the reads of the frames hold threads stopped. Call once the threads
  // run again, before add_to.
  void read_stores(ObjectReader& objects);

  // Adds the groups found outside the registry to `state`, and the stores of the registry's
  // groups met in frames to theirs.
  void add_to(model::DistributedState& state) const;
  bool empty() const { return found_.empty() && registry_stores_.empty(); }

  // The short name of a process-group type ("ProcessGroupGloo" of
  // "torch._C._distributed_c10d.ProcessGroupGloo"), nullopt for any other type.
  static std::optional<std::string> group_type(std::string_view type_name);

 private:
  void consider(std::uint64_t object, const std::string& type, const std::string& held_by,
                ObjectReader& objects);
  void search_attributes(std::uint64_t object, const std::string& path, int depth,
                         ObjectReader& objects);
  std::optional<model::ProcessGroupState> read_torch_group(std::uint64_t object,
                                                           ObjectReader& objects);
  std::optional<model::ProcessGroupState> read_stateless_group(std::uint64_t object,
                                                               ObjectReader& objects);
  // The C++ object whose store chain read_stores reads for the group `object`.
  void store_held_by(std::uint64_t object, std::uint64_t cpp_object);

  elf::ProcessImage& image_;
  std::optional<TorchStoreReader> stores_;  // located on first use
  std::map<std::uint64_t, std::string>& labels_;
  std::map<std::uint64_t, model::ProcessGroupState> found_;  // outside the registry, by object
  std::map<std::uint64_t, StoreChain> registry_stores_;      // registry groups met, by object
  std::map<std::uint64_t, std::uint64_t> store_holders_;     // group object → its C++ object
  std::set<std::uint64_t> searched_;                         // objects whose attributes were read
};

}  // namespace hangscope::python

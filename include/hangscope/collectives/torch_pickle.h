// A strict reader for the pickles torch's C++ Pickler writes (protocol 2), as in flight-recorder
// dumps: only the opcodes that Pickler emits for dicts, lists, tuples, strings, numbers, bools
// and None (plus its type-tag and specialised-list globals). Anything else — objects, tensors,
// arbitrary globals — is refused with the opcode and its offset, so no input runs code.
//
// Decoding and expanding are budgeted (docs/security.md, "Amplification"). The decoded values
// live once each in an arena (`Pickle`); a memo reference (BINGET) shares the value it names, as
// Python's Unpickler does, so it costs O(1) and a list memoised before its items were appended
// (Python's own pickle does this) holds them. Every node, string byte and container slot counts
// against `max_decoded_bytes`. Turning a value into JSON visits a shared value once per
// reference, so a few KiB of references to references would expand to terabytes: every visit
// counts against `max_expanded_values` / `max_expanded_bytes`, and nesting against `max_depth`
// (which also ends a value that contains itself).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hangscope/common/bounded_json.h"

namespace hangscope::collectives {

struct PickleLimits {
  std::size_t max_decoded_bytes = 256u << 20;  // memory the decoded values take (estimated)
  std::size_t max_expanded_values = 1u << 22;  // values visited to make JSON (4,194,304)
  std::size_t max_expanded_bytes = 64u << 20;  // string bytes copied into JSON
  std::size_t max_depth = 128;                 // nesting of the JSON made
};

// The decoded values of one pickle.
class Pickle {
 public:
  using Id = std::uint32_t;
  enum class Kind : std::uint8_t {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kGlobal
  };

  Id root() const { return root_; }
  Kind kind(Id id) const { return nodes_[id].kind; }
  bool boolean(Id id) const { return nodes_[id].bits != 0; }
  std::int64_t integer(Id id) const;
  double real(Id id) const;
  const std::string& text(Id id) const { return strings_[nodes_[id].ref]; }  // string, global
  // A list's or tuple's items; a dict's keys and values, alternating, in the order written.
  const std::vector<Id>& items(Id id) const { return containers_[nodes_[id].ref]; }
  std::size_t decoded_bytes() const { return decoded_bytes_; }
  std::size_t node_count() const { return nodes_.size(); }

 private:
  friend class Unpickler;
  struct Node {
    Kind kind = Kind::kNone;
    std::uint32_t ref = 0;   // index into strings_ or containers_
    std::uint64_t bits = 0;  // bool, int64 or double
  };
  std::vector<Node> nodes_;
  std::vector<std::string> strings_;
  std::vector<std::vector<Id>> containers_;
  Id root_ = 0;
  std::size_t decoded_bytes_ = 0;
};

// Decodes `bytes`; throws hangscope::Error "pickle offset N: reason", also for a pickle whose
// values would take more than limits.max_decoded_bytes.
Pickle decode_torch_pickle(const std::string& bytes, const PickleLimits& limits = {});

// Values of a Pickle as JSON (dicts become objects, non-string keys as their JSON text; lists and
// tuples arrays; None null), every visit counted against one budget across calls. `keep` (as
// parse_json_within's) drops dict members by their path before they are expanded or counted.
// Throws hangscope::Error "pickle: reason" past a limit.
class PickleExpander {
 public:
  PickleExpander(const Pickle& pickle, const PickleLimits& limits = {})
      : pickle_(pickle), limits_(limits) {}
  nlohmann::json to_json(Pickle::Id id, const JsonKeep& keep = {});
  std::size_t values_visited() const { return values_; }

 private:
  nlohmann::json expand(Pickle::Id id, const JsonKeep& keep, std::vector<std::string>& path);
  void count_value();
  void count_bytes(std::size_t n);

  const Pickle& pickle_;
  PickleLimits limits_;
  std::size_t values_ = 0;
  std::size_t bytes_ = 0;
};

// The whole pickled value as JSON, within `limits`. Throws hangscope::Error "pickle …: reason".
nlohmann::json unpickle_torch(const std::string& bytes, const PickleLimits& limits = {});

}  // namespace hangscope::collectives

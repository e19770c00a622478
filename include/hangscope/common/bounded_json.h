// JSON from outside (flight-recorder dumps, the records in snapshots, cache files, peers' replies)
// parsed under a budget: nesting depth and the number of values kept are bounded, so a file of a
// few MiB cannot make the process allocate gigabytes or recurse past its stack when the value is
// later copied or printed (nlohmann's dump and copies recurse once per level).
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace hangscope {

struct JsonLimits {
  std::size_t max_depth = 128;                // nested arrays and objects
  std::size_t max_values = 1u << 22;          // values kept (scalars, arrays, objects), 4,194,304
  std::size_t max_string_bytes = 256u << 20;  // bytes of kept strings and keys
};

// Which members of objects to keep: the path of the member from the root, one element per
// level: a key for an object member, "*" for an array element; e.g. {"entries", "*", "frames"}
// for the frames of every entry. A member it refuses is parsed but not kept, and its values do
// not count against the limits.
using JsonKeep = std::function<bool(const std::vector<std::string>& path)>;

// nlohmann::json::parse of `text` within `limits`; throws hangscope::Error naming the reason:
// "not valid JSON: …" (nlohmann's message), "nested deeper than 128 levels", "more than N
// values", "more than N bytes of strings". std::bad_alloc is not caught here.
nlohmann::json parse_json_within(std::string_view text, const JsonLimits& limits = {},
                                 const JsonKeep& keep = {});

}  // namespace hangscope

#include "hangscope/common/bounded_json.h"

#include <limits>

#include "hangscope/common/error.h"

namespace hangscope {
namespace {

using nlohmann::json;

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// The parser's callback: counts what is kept, refuses what is too deep or too much, and drops
// the members `keep` refuses (nlohmann then builds nothing below them).
class Budget {
 public:
  Budget(const JsonLimits& limits, const JsonKeep& keep) : limits_(limits), keep_(keep) {}

  bool operator()(int signed_depth, json::parse_event_t event, json& parsed) {
    const auto depth = static_cast<std::size_t>(signed_depth);
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth + 1 > limits_.max_depth) {
          throw Error("nested deeper than " + std::to_string(limits_.max_depth) + " levels");
        }
        path_.resize(depth);
        path_.emplace_back(event == json::parse_event_t::array_start ? "*" : "");
        if (!discarding(depth)) count_value();
        return true;
      case json::parse_event_t::key: {
        if (discard_at_ != kNone && depth <= discard_at_) discard_at_ = kNone;
        if (discarding(depth)) return true;
        if (depth == 0 || path_.size() < depth) return true;  // not inside an object: no key
        path_.resize(depth);
        path_[depth - 1] = parsed.is_string() ? parsed.get_ref<const std::string&>() : "";
        if (keep_ && !keep_(path_)) {
          discard_at_ = depth;
          return false;
        }
        count_bytes(path_[depth - 1].size());
        return true;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (discard_at_ != kNone && depth < discard_at_) discard_at_ = kNone;
        return true;
      case json::parse_event_t::value:
        if (discarding(depth)) return true;
        count_value();
        if (parsed.is_string()) count_bytes(parsed.get_ref<const std::string&>().size());
        return true;
    }
    return true;
  }

 private:
  bool discarding(std::size_t depth) const { return discard_at_ != kNone && depth >= discard_at_; }

  void count_value() {
    if (++values_ > limits_.max_values) {
      throw Error("more than " + std::to_string(limits_.max_values) + " values");
    }
  }

  void count_bytes(std::size_t n) {
    bytes_ += n;
    if (bytes_ > limits_.max_string_bytes) {
      throw Error("more than " + std::to_string(limits_.max_string_bytes) + " bytes of strings");
    }
  }

  const JsonLimits& limits_;
  const JsonKeep& keep_;
  std::vector<std::string> path_;   // the key (or "*") below each open container
  std::size_t discard_at_ = kNone;  // the depth of a member being dropped
  std::size_t values_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace

json parse_json_within(std::string_view text, const JsonLimits& limits, const JsonKeep& keep) {
  Budget budget(limits, keep);
  return json::parse(
      text.begin(), text.end(),
      [&budget](int depth, json::parse_event_t event, json& parsed) {
        return budget(depth, event, parsed);
      },
      true);
}

}  // namespace hangscope

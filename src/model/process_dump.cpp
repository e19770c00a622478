#include "hangscope/model/process_dump.h"

#include <algorithm>

namespace hangscope::model {

std::string_view Socket::state_name() const {
  return family == Family::kUnix ? unix_state_name(state) : tcp_state_name(state);
}

FrameList::FrameList(std::vector<Frame> frames) {
  if (frames.empty()) return;
  auto own = std::make_shared<const std::vector<Frame>>(std::move(frames));
  auto stack = std::make_shared<Stack>();
  stack->frames.reserve(own->size());
  for (const auto& f : *own) stack->frames.push_back(&f);
  stack->owner = std::move(own);
  stack_ = std::move(stack);
}

void FrameList::push_back(Frame frame) {
  edit([&](std::vector<Frame>& frames) { frames.push_back(std::move(frame)); });
}

bool FrameList::operator==(const FrameList& other) const {
  if (stack_ == other.stack_) return true;
  if (size() != other.size()) return false;
  for (std::size_t i = 0; i < size(); ++i) {
    const Frame* a = stack_->frames[i];
    const Frame* b = other.stack_->frames[i];
    if (a != b && !(*a == *b)) return false;
  }
  return true;
}

bool in_asyncio(const Frame& frame) {
  return frame.kind == Frame::Kind::kPython && frame.file.find("/asyncio/") != std::string::npos;
}

std::uint32_t ProbeTally::outside(std::size_t depth) const {
  std::uint32_t probes = 0;
  for (const auto& [frames, n] : kept) {
    if (frames <= depth) probes += n;
  }
  return probes;
}

void ProbeTally::count(std::uint32_t frames_kept) {
  ++taken;
  auto it = std::lower_bound(kept.begin(), kept.end(), frames_kept,
                             [](const auto& entry, std::uint32_t f) { return entry.first < f; });
  if (it != kept.end() && it->first == frames_kept) {
    ++it->second;
  } else {
    kept.insert(it, {frames_kept, 1});
  }
}

}  // namespace hangscope::model

namespace hangscope::model {

const ProcessGroupState* DistributedState::find(std::string_view name) const {
  for (const auto& g : groups) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

bool DistributedState::initialized() const {
  return std::any_of(groups.begin(), groups.end(),
                     [](const ProcessGroupState& g) { return g.registered; });
}

const ProcessGroupState* DistributedState::default_group() const {
  for (const auto& g : groups) {
    if (g.is_default) return &g;
  }
  return nullptr;
}

namespace {
constexpr std::string_view kLabelPrefix = "<process group ";
}  // namespace

std::string group_label(std::string_view name) {
  return std::string(kLabelPrefix) + std::string(name) + ">";
}

std::optional<std::string> group_in_label(std::string_view text) {
  if (text.size() <= kLabelPrefix.size() + 1 ||
      text.substr(0, kLabelPrefix.size()) != kLabelPrefix || text.back() != '>') {
    return std::nullopt;
  }
  return std::string(text.substr(kLabelPrefix.size(), text.size() - kLabelPrefix.size() - 1));
}

std::string_view describe_state(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "uninterruptible sleep";
    case 'T':
      return "stopped";
    case 't':
      return "tracing stop";
    case 'Z':
      return "zombie";
    case 'X':
      return "dead";
    case 'I':
      return "idle";
    case 'P':
      return "parked";
    default:
      return "unknown state";
  }
}

}  // namespace hangscope::model

#include "hangscope/capture/process_dump.h"

namespace hangscope::capture {

const std::vector<Frame>& FrameList::vector() const {
  static const std::vector<Frame> kNoFrames;
  return frames_ ? *frames_ : kNoFrames;
}

std::vector<Frame>& FrameList::edit() {
  if (!frames_) {
    frames_ = std::make_shared<std::vector<Frame>>();
  } else if (frames_.use_count() > 1) {
    frames_ = std::make_shared<std::vector<Frame>>(*frames_);
  }
  return *frames_;
}

}  // namespace hangscope::capture

namespace hangscope::capture {

const ProcessGroupState* DistributedState::find(std::string_view name) const {
  for (const auto& g : groups) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

const ProcessGroupState* DistributedState::default_group() const {
  for (const auto& g : groups) {
    if (g.is_default) return &g;
  }
  return nullptr;
}

}  // namespace hangscope::capture

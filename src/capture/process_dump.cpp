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

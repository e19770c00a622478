// Turns unwound program counters into named frames: function, module, offsets.
#pragma once

#include <vector>

#include "hangscope/capture/process_dump.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/native/unwinder.h"

namespace hangscope::native {

class Symbolizer {
 public:
  explicit Symbolizer(elf::ProcessImage& image) : image_(image) {}

  // Frames innermost first. A return address is looked up one byte earlier so that a call at
  // the very end of a function is named after its caller, not the next function.
  std::vector<capture::Frame> symbolize(const std::vector<RawFrame>& frames);
  capture::Frame symbolize_one(std::uint64_t pc, bool exact_pc);

 private:
  elf::ProcessImage& image_;
};

}  // namespace hangscope::native

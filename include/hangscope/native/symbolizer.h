// Turns unwound program counters into named frames: function, module, offsets.
#pragma once

#include <vector>

#include "hangscope/elf/process_image.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/native/unwinder.h"

namespace hangscope::native {

class Symbolizer {
 public:
  explicit Symbolizer(elf::ProcessImage& image) : image_(image) {}

  // The stacks of many threads (each innermost first) at once: each module's symbols are
  // searched once for all the addresses that fall in it. A return address is looked up one
  // byte earlier so that a call at the very end of a function is named after its caller, not
  // the next function.
  std::vector<std::vector<model::Frame>> symbolize_stacks(
      const std::vector<const std::vector<RawFrame>*>& stacks);
  std::vector<model::Frame> symbolize(const std::vector<RawFrame>& frames);

 private:
  elf::ProcessImage& image_;
};

}  // namespace hangscope::native

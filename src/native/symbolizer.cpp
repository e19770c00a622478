#include "hangscope/native/symbolizer.h"

#include "hangscope/elf/symbol_table.h"

namespace hangscope::native {

capture::Frame Symbolizer::symbolize_one(std::uint64_t pc, bool exact_pc) {
  capture::Frame frame;
  frame.kind = capture::Frame::Kind::kNative;
  frame.address = pc;
  const std::uint64_t lookup_pc = exact_pc || pc == 0 ? pc : pc - 1;
  const auto location = image_.locate(lookup_pc);
  if (!location) return frame;
  frame.module = location->mapping->path;
  if (location->module == nullptr) {
    frame.module_offset = pc - location->mapping->start + location->mapping->offset;
    frame.offset = frame.module_offset;
    return frame;
  }
  frame.module_offset = pc - location->bias;
  frame.offset = frame.module_offset;
  if (const auto match = location->module->symbols().lookup(location->vaddr)) {
    frame.function = elf::demangle(match->name);
    frame.offset = frame.module_offset - match->start;
  }
  return frame;
}

std::vector<capture::Frame> Symbolizer::symbolize(const std::vector<RawFrame>& frames) {
  std::vector<capture::Frame> out;
  out.reserve(frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) {
    // The innermost pc, and the pc interrupted by a signal, are exact; others are return addresses.
    const bool exact = i == 0 || frames[i - 1].signal_frame;
    out.push_back(symbolize_one(frames[i].pc, exact));
  }
  return out;
}

}  // namespace hangscope::native

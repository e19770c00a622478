#include "hangscope/native/symbolizer.h"

#include <map>

#include "hangscope/elf/symbol_table.h"

namespace hangscope::native {
namespace {

// The frame of one pc before its function is named, and where to put the name.
struct Pending {
  model::Frame* frame;
  std::uint64_t vaddr;
};

}  // namespace

std::vector<std::vector<model::Frame>> Symbolizer::symbolize_stacks(
    const std::vector<const std::vector<RawFrame>*>& stacks) {
  std::vector<std::vector<model::Frame>> out(stacks.size());
  std::map<const elf::Module*, std::vector<Pending>> by_module;
  for (std::size_t s = 0; s < stacks.size(); ++s) {
    const auto& frames = *stacks[s];
    out[s].resize(frames.size());
    for (std::size_t i = 0; i < frames.size(); ++i) {
      // The innermost pc, and the pc interrupted by a signal, are exact.
      const bool exact = i == 0 || frames[i - 1].signal_frame;
      const std::uint64_t pc = frames[i].pc;
      model::Frame& frame = out[s][i];
      frame.kind = model::Frame::Kind::kNative;
      frame.address = pc;
      const auto location = image_.locate(exact || pc == 0 ? pc : pc - 1);
      if (!location) continue;
      frame.module = location->mapping->path;
      if (location->module == nullptr) {
        frame.module_offset = pc - location->mapping->start + location->mapping->offset;
        frame.offset = frame.module_offset;
        continue;
      }
      frame.module_offset = pc - location->bias;
      frame.offset = frame.module_offset;
      by_module[location->module].push_back({&frame, location->vaddr});
    }
  }
  std::map<std::string_view, std::string> demangled;  // one demangling per distinct name
  for (auto& [module, pending] : by_module) {
    std::vector<std::uint64_t> vaddrs;
    vaddrs.reserve(pending.size());
    for (const auto& p : pending) vaddrs.push_back(p.vaddr);
    const auto matches = module->symbols().lookup_many(vaddrs);
    for (std::size_t i = 0; i < pending.size(); ++i) {
      if (!matches[i]) continue;
      auto [name, inserted] = demangled.try_emplace(matches[i]->name);
      if (inserted) name->second = elf::demangle(matches[i]->name);
      pending[i].frame->function = name->second;
      pending[i].frame->offset = pending[i].frame->module_offset - matches[i]->start;
    }
  }
  return out;
}

std::vector<model::Frame> Symbolizer::symbolize(const std::vector<RawFrame>& frames) {
  return std::move(symbolize_stacks({&frames}).front());
}

}  // namespace hangscope::native

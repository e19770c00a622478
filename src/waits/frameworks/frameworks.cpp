// The registry of the framework tables: their order, and the frames of one meaning across them.
#include "hangscope/waits/frameworks.h"

#include <map>

namespace hangscope::waits {

const std::vector<const FrameworkTable*>& frameworks() {
  // The order the wait primitives (and job variables, titles, group modules) are tried in:
  // torch's before the frameworks built on it, the standard library's last (a peer-facing wait
  // outranks a lock under it anyway).
  static const std::vector<const FrameworkTable*> all = {&torch_table(),  &vllm_table(),
                                                         &sglang_table(), &megatron_table(),
                                                         &ray_table(),    &python_table()};
  return all;
}

const FrameworkTable* framework_named(std::string_view name) {
  for (const auto* table : frameworks()) {
    if (table->name == name) return table;
  }
  return nullptr;
}

const FrameworkTable& default_serving_framework() {
  for (const auto* table : frameworks()) {
    if (table->serving && table->serving->by_default) return *table;
  }
  return vllm_table();  // unreachable while vLLM's table says it is the default
}

const model::FramePatterns& frames_meaning(FrameMeaning meaning) {
  static const auto by_meaning = [] {
    std::map<FrameMeaning, model::FramePatterns> out;
    for (const auto* table : frameworks()) {
      for (const auto& [m, pattern] : table->frames) out[m].push_back(pattern);
    }
    return out;
  }();
  static const model::FramePatterns none;
  const auto it = by_meaning.find(meaning);
  return it == by_meaning.end() ? none : it->second;
}

bool means(const model::Frame& frame, FrameMeaning meaning) {
  for (const auto& p : frames_meaning(meaning)) {
    if (p.matches(frame)) return true;
  }
  return false;
}

bool process_has(const model::ProcessDump& dump, FrameMeaning meaning) {
  const auto& patterns = frames_meaning(meaning);
  return model::any_python_frame(dump, patterns) || model::any_native_frame(dump, patterns);
}

}  // namespace hangscope::waits

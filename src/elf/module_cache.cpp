#include "hangscope/elf/module_cache.h"

namespace hangscope::elf {

std::shared_ptr<const Module> ModuleCache::get(
    const Key& key, const std::function<std::shared_ptr<const Module>()>& open) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = modules_.find(key); it != modules_.end()) return it->second;
  }
  auto module = open();
  if (!module) return module;
  std::lock_guard<std::mutex> lock(mutex_);
  // Bounded: a node that ran through many different files starts over (modules in use by a
  // capture stay alive through its shared pointers).
  if (modules_.size() >= max_modules_) modules_.clear();
  return modules_.emplace(key, std::move(module)).first->second;
}

std::size_t ModuleCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return modules_.size();
}

}  // namespace hangscope::elf

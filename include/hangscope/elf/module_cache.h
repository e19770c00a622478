// Parsed ELF modules shared by the captures of one node: the ranks of a job map the same
// libraries (libtorch, libpython, libc), so each file's symbols and unwind index are built
// once per (device, inode, path) and reused across processes and samples. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "hangscope/elf/module.h"

namespace hangscope::elf {

class ModuleCache {
 public:
  using Key = std::tuple<std::string, std::uint64_t, std::string>;  // device, inode, path

  explicit ModuleCache(std::size_t max_modules = 1024) : max_modules_(max_modules) {}

  // The cached module, or the one `open` returns (cached when it is not null). `open` runs
  // outside the lock: two callers may open the same file at once, the first stored wins.
  std::shared_ptr<const Module> get(const Key& key,
                                    const std::function<std::shared_ptr<const Module>()>& open);

  std::size_t size() const;

 private:
  std::size_t max_modules_;
  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<const Module>> modules_;
};

}  // namespace hangscope::elf

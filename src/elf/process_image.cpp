#include "hangscope/elf/process_image.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "hangscope/common/error.h"
#include "hangscope/common/text.h"

namespace hangscope::elf {

ProcessImage::ProcessImage(std::shared_ptr<const ModuleFiles> files, proc::MemoryMap maps,
                           std::shared_ptr<ModuleCache> cache)
    : files_(std::move(files)),
      maps_(std::move(maps)),
      debug_roots_(files_->debug_roots()),
      cache_(std::move(cache)) {}

ProcessImage::ProcessImage(const proc::ProcessFs& fs, proc::MemoryMap maps,
                           std::shared_ptr<ModuleCache> cache)
    : ProcessImage(std::make_shared<ProcFiles>(fs), std::move(maps), std::move(cache)) {}

const Module* ProcessImage::module_for(const proc::Mapping& mapping) {
  if (!mapping.is_file()) return nullptr;
  {
    std::lock_guard lock(mutex_);
    if (const auto it = by_mapping_.find(&mapping); it != by_mapping_.end()) return it->second;
  }
  auto key = std::make_tuple(mapping.device, mapping.inode, mapping.path);
  {
    std::lock_guard lock(mutex_);
    auto it = modules_.find(key);
    if (it != modules_.end()) {
      by_mapping_.emplace(&mapping, it->second.get());
      return it->second.get();
    }
  }
  std::string first_error;
  const auto open = [&]() -> std::shared_ptr<const Module> {
    for (const auto& candidate : files_->candidates(mapping)) {
      if (!candidate.refusal.empty()) {
        if (first_error.empty()) first_error = printable(candidate.path) + ": " + candidate.refusal;
        continue;
      }
      try {
        return Module::open(mapping.path, candidate.path, debug_roots_, candidate.links);
      } catch (const Error& e) {
        if (first_error.empty()) first_error = e.what();
      }
    }
    return nullptr;
  };
  // A deleted file is never shared: its inode may be reused by another file.
  std::shared_ptr<const Module> module =
      cache_ && !mapping.deleted ? cache_->get(key, open) : open();
  std::lock_guard lock(mutex_);
  // Another thread may have opened the same file meanwhile: the first one kept is the one used.
  if (auto it = modules_.find(key); it != modules_.end()) {
    by_mapping_.emplace(&mapping, it->second.get());
    return it->second.get();
  }
  if (!module) {
    failures_.push_back(
        {&mapping, "cannot read " + mapping.path + (mapping.deleted ? " (deleted)" : "") +
                       ": frames in it show addresses only (" + first_error +
                       (files_->missing_hint().empty() ? "" : "; " + files_->missing_hint()) +
                       ")"});
  }
  const Module* result = module.get();
  modules_.emplace(std::move(key), std::move(module));
  by_mapping_.emplace(&mapping, result);
  return result;
}

std::optional<Location> ProcessImage::locate(std::uint64_t address) {
  const proc::Mapping* mapping = maps_.find(address);
  if (mapping == nullptr) return std::nullopt;
  Location location;
  location.mapping = mapping;
  location.module = module_for(*mapping);
  if (location.module != nullptr) {
    const std::uint64_t file_offset = address - mapping->start + mapping->offset;
    if (const auto vaddr = location.module->elf().vaddr_of_file_offset(file_offset)) {
      location.vaddr = *vaddr;
      location.bias = address - *vaddr;
    } else {
      location.module = nullptr;  // mapped bytes outside every PT_LOAD: no ELF meaning
    }
  }
  return location;
}

std::vector<std::string> ProcessImage::notes() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> notes;
  for (const auto& failure : failures_) {
    const bool has_code =
        std::any_of(maps_.mappings().begin(), maps_.mappings().end(), [&](const proc::Mapping& m) {
          return m.executable && m.inode == failure.mapping->inode &&
                 m.device == failure.mapping->device;
        });
    if (has_code) notes.push_back(failure.message);
  }
  return notes;
}

std::vector<const proc::Mapping*> ProcessImage::file_mappings() const {
  std::vector<const proc::Mapping*> files;
  std::set<std::tuple<std::string, std::uint64_t, std::string>> seen;
  for (const auto& mapping : maps_.mappings()) {
    if (mapping.is_file() && seen.emplace(mapping.device, mapping.inode, mapping.path).second) {
      files.push_back(&mapping);
    }
  }
  return files;
}

std::size_t ProcessImage::read_file_backed(std::uint64_t address, void* out, std::size_t size,
                                           std::optional<Location>* last) {
  std::optional<Location> located;
  std::optional<Location>& where = last != nullptr ? *last : located;
  if (!where || !where->mapping->contains(address)) {
    where = locate(address);
    if (!where) return 0;
  }
  if (where->module == nullptr || where->mapping->writable) return 0;
  // One mapping maps one run of the file at one bias (the kernel merges neighbours only when
  // both the addresses and the file offsets run on).
  const std::uint64_t vaddr = address - where->bias;
  const std::size_t in_mapping = where->mapping->end - address;
  return where->module->read_vaddr(vaddr, out, std::min(size, in_mapping));
}

}  // namespace hangscope::elf

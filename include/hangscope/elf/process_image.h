// The ELF modules mapped into one process and where each is loaded (load bias per mapping).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "hangscope/elf/module.h"
#include "hangscope/elf/module_cache.h"
#include "hangscope/elf/module_files.h"
#include "hangscope/proc/maps.h"
#include "hangscope/proc/process_fs.h"

namespace hangscope::elf {

// Where an address of the target lies.
struct Location {
  const proc::Mapping* mapping = nullptr;
  const Module* module = nullptr;  // null when the file could not be opened
  std::uint64_t bias = 0;          // runtime address - ELF virtual address (valid with module)
  std::uint64_t vaddr = 0;         // the address as a virtual address of the module
};

// Safe to use from several threads at once (a capture reads Python beside the native unwinding).
class ProcessImage {
 public:
  // `files` says where each mapped file is opened; `cache` (optional) shares parsed modules
  // with other processes and samples of the node.
  ProcessImage(std::shared_ptr<const ModuleFiles> files, proc::MemoryMap maps,
               std::shared_ptr<ModuleCache> cache = nullptr);
  // A live process: its files through /proc (ProcFiles).
  ProcessImage(const proc::ProcessFs& fs, proc::MemoryMap maps,
               std::shared_ptr<ModuleCache> cache = nullptr);

  const proc::MemoryMap& maps() const { return maps_; }

  // nullopt when the address is in no mapping. Opens modules on first use; a file that
  // cannot be opened is tried once and reported in notes().
  std::optional<Location> locate(std::uint64_t address);

  // The first mapping of every distinct file mapped into the process, in address order.
  // Nothing is opened: call locate() on a mapping's start to open that one file.
  std::vector<const proc::Mapping*> file_mappings() const;

  // Copies bytes of a file-backed mapping from the local copy of the file. `last`, when given,
  // is where the caller's previous read was: an address in the same mapping is read without
  // looking it up again (the unwinder reads a module's .eh_frame a word at a time).
  std::size_t read_file_backed(std::uint64_t address, void* out, std::size_t size,
                               std::optional<Location>* last = nullptr);

  // Messages about code files that could not be opened or parsed, one per file (data files
  // that are not ELF, such as locale archives, are not worth a note).
  std::vector<std::string> notes() const;

 private:
  const Module* module_for(const proc::Mapping& mapping);

  std::shared_ptr<const ModuleFiles> files_;
  proc::MemoryMap maps_;
  std::vector<std::string> debug_roots_;
  // Keyed by (device, inode, path): one Module per file, null after a failed open.
  std::shared_ptr<ModuleCache> cache_;
  std::map<ModuleCache::Key, std::shared_ptr<const Module>> modules_;
  // The module of each mapping already asked for: found without building the file's key.
  std::unordered_map<const proc::Mapping*, const Module*> by_mapping_;
  struct OpenFailure {
    const proc::Mapping* mapping;
    std::string message;
  };
  std::vector<OpenFailure> failures_;
  mutable std::mutex mutex_;  // guards the maps above and failures_; never held while a file opens
};

}  // namespace hangscope::elf

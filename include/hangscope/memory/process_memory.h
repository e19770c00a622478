// Reads a live process's memory: process_vm_readv, falling back to /proc/PID/mem.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "hangscope/memory/memory_reader.h"

namespace hangscope::memory {

// Reads may come from several threads at once.
class ProcessMemory final : public MemoryReader {
 public:
  explicit ProcessMemory(pid_t pid);
  ~ProcessMemory() override;
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;

  std::size_t read(std::uint64_t address, void* out, std::size_t size) override;

  // Several reads with as few system calls as the kernel allows (process_vm_readv's iovecs).
  void read_many(std::span<ReadRequest> requests) override;

  pid_t pid() const { return pid_; }

 private:
  std::size_t read_via_proc_mem(std::uint64_t address, void* out, std::size_t size);
  int mem_fd();  // /proc/PID/mem, opened on first use; -1 when it cannot be

  pid_t pid_;
  std::mutex mem_open_;  // guards the opening of mem_fd_
  std::atomic<int> mem_fd_{-1};
  std::atomic<bool> vm_readv_refused_{false};
};

}  // namespace hangscope::memory

#include "hangscope/memory/process_memory.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace hangscope::memory {

ProcessMemory::ProcessMemory(pid_t pid) : pid_(pid) {}

ProcessMemory::~ProcessMemory() {
  if (const int fd = mem_fd_.load(); fd >= 0) ::close(fd);
}

std::size_t ProcessMemory::read(std::uint64_t address, void* out, std::size_t size) {
  if (size == 0) return 0;
  if (!vm_readv_refused_) {
    iovec local{out, size};
    iovec remote{reinterpret_cast<void*>(address), size};
    const ssize_t n = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != ENOSYS && errno != EPERM) return 0;  // EFAULT/ESRCH: nothing readable there
    vm_readv_refused_ = true;
  }
  return read_via_proc_mem(address, out, size);
}

void ProcessMemory::read_many(std::span<ReadRequest> requests) {
  // process_vm_readv stops at the first fault, so a batch is split on failure and the rest
  // retried one by one; IOV_MAX bounds one call.
  constexpr std::size_t kMaxIov = 1024;
  std::size_t first = 0;
  while (first < requests.size()) {
    const std::size_t count = std::min(kMaxIov, requests.size() - first);
    std::vector<iovec> local(count), remote(count);
    std::size_t total = 0;
    for (std::size_t i = 0; i < count; ++i) {
      auto& r = requests[first + i];
      local[i] = {r.out, r.size};
      remote[i] = {reinterpret_cast<void*>(r.address), r.size};
      total += r.size;
    }
    ssize_t n = -1;
    if (!vm_readv_refused_) {
      n = ::process_vm_readv(pid_, local.data(), count, remote.data(), count, 0);
      if (n < 0 && (errno == ENOSYS || errno == EPERM)) vm_readv_refused_ = true;
    }
    std::size_t done = n > 0 ? static_cast<std::size_t>(n) : 0;
    std::size_t i = 0;
    for (; i < count && done >= requests[first + i].size; ++i) {
      requests[first + i].copied = requests[first + i].size;
      done -= requests[first + i].size;
    }
    if (static_cast<std::size_t>(n > 0 ? n : 0) == total) {
      first += count;
      continue;
    }
    // Request i faulted (or the call failed): read it alone, then go on after it.
    auto& failed = requests[first + i];
    failed.copied = read(failed.address, failed.out, failed.size);
    first += i + 1;
  }
}

int ProcessMemory::mem_fd() {
  if (const int fd = mem_fd_.load(); fd >= 0) return fd;
  std::lock_guard lock(mem_open_);
  if (mem_fd_.load() < 0) {
    mem_fd_ = ::open(("/proc/" + std::to_string(pid_) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  }
  return mem_fd_.load();
}

std::size_t ProcessMemory::read_via_proc_mem(std::uint64_t address, void* out, std::size_t size) {
  const int fd = mem_fd();
  if (fd < 0) return 0;
  std::size_t copied = 0;
  while (copied < size) {
    const ssize_t n = ::pread(fd, static_cast<char*>(out) + copied, size - copied,
                              static_cast<off_t>(address + copied));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    copied += static_cast<std::size_t>(n);
  }
  return copied;
}

}  // namespace hangscope::memory

// The architecture interface: registers of a stopped thread, read with ptrace, named for libunwind.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>

namespace hangscope::native {

// A copy of the general-purpose registers of one thread (x86-64 today; aarch64 slots in here).
class RegisterSet {
 public:
  // Number of registers the unwinder addresses by its own numbering.
  static constexpr int kCount = 17;

  std::uint64_t instruction_pointer() const;
  std::uint64_t stack_pointer() const;
  // The thread pointer (fs_base on x86-64): pthread_self() of the thread in glibc.
  std::uint64_t thread_pointer() const { return thread_pointer_; }

  // A register by libunwind's number (UNW_<ARCH>_*); nullopt for ones not held here.
  std::optional<std::uint64_t> by_unwind_number(int number) const;

  // Bytes below the stack pointer that leaf functions may use without moving it.
  static constexpr std::uint64_t kRedZone = 128;

 private:
  std::array<std::uint64_t, kCount> values_{};
  std::uint64_t thread_pointer_ = 0;

  friend int read_registers(pid_t tid, RegisterSet& out);

  // The registers as the kernel's user_regs_struct words (a core file's NT_PRSTATUS).
  RegisterSet registers_from_words(const std::array<std::uint64_t, 27>& words);
  friend RegisterSet registers_from_words(const std::array<std::uint64_t, 27>& words);
};

// Reads the registers of a ptrace-stopped thread; returns 0 or an errno value.
int read_registers(pid_t tid, RegisterSet& out);

// The registers as the kernel's user_regs_struct words (a core file's NT_PRSTATUS).
RegisterSet registers_from_words(const std::array<std::uint64_t, 27>& words);

}  // namespace hangscope::native

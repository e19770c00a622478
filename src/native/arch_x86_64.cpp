// x86-64 implementation of the architecture interface (registers.h).
#include <elf.h>
#include <libunwind-x86_64.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

#include <cerrno>
#include <cstring>

#include "arch_unwind.h"
#include "hangscope/native/registers.h"

// Exported by libunwind-x86_64 but not declared in its headers.
extern "C" int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                                  unw_dyn_info_t* di, unw_proc_info_t* pi,
                                                  int need_unwind_info, void* arg);

namespace hangscope::native {

int arch::search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t* info,
                              unw_proc_info_t* proc_info, int need_unwind_info, void* arg) {
  return _Ux86_64_dwarf_search_unwind_table(as, ip, info, proc_info, need_unwind_info, arg);
}

static_assert(UNW_X86_64_RIP == RegisterSet::kCount - 1, "unwind numbering: RIP is the last slot");

std::uint64_t RegisterSet::instruction_pointer() const {
  return values_[UNW_X86_64_RIP];
}
std::uint64_t RegisterSet::stack_pointer() const {
  return values_[UNW_X86_64_RSP];
}

std::optional<std::uint64_t> RegisterSet::by_unwind_number(int number) const {
  if (number < 0 || number >= kCount) return std::nullopt;
  return values_[static_cast<std::size_t>(number)];
}

namespace {

void fill(const user_regs_struct& regs, std::array<std::uint64_t, RegisterSet::kCount>& v,
          std::uint64_t& thread_pointer) {
  v[UNW_X86_64_RAX] = regs.rax;
  v[UNW_X86_64_RDX] = regs.rdx;
  v[UNW_X86_64_RCX] = regs.rcx;
  v[UNW_X86_64_RBX] = regs.rbx;
  v[UNW_X86_64_RSI] = regs.rsi;
  v[UNW_X86_64_RDI] = regs.rdi;
  v[UNW_X86_64_RBP] = regs.rbp;
  v[UNW_X86_64_RSP] = regs.rsp;
  v[UNW_X86_64_R8] = regs.r8;
  v[UNW_X86_64_R9] = regs.r9;
  v[UNW_X86_64_R10] = regs.r10;
  v[UNW_X86_64_R11] = regs.r11;
  v[UNW_X86_64_R12] = regs.r12;
  v[UNW_X86_64_R13] = regs.r13;
  v[UNW_X86_64_R14] = regs.r14;
  v[UNW_X86_64_R15] = regs.r15;
  v[UNW_X86_64_RIP] = regs.rip;
  thread_pointer = regs.fs_base;
}

}  // namespace

int read_registers(pid_t tid, RegisterSet& out) {
  user_regs_struct regs{};
  iovec io{&regs, sizeof regs};
  if (::ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_PRSTATUS), &io) != 0) {
    return errno;
  }
  fill(regs, out.values_, out.thread_pointer_);
  return 0;
}

static_assert(sizeof(user_regs_struct) == 27 * sizeof(std::uint64_t));

RegisterSet registers_from_words(const std::array<std::uint64_t, 27>& words) {
  user_regs_struct regs{};
  std::memcpy(&regs, words.data(), sizeof regs);
  RegisterSet out;
  fill(regs, out.values_, out.thread_pointer_);
  return out;
}

}  // namespace hangscope::native

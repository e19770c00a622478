// System calls without libc's wrappers, for the stop watchdog: cloned with CLONE_VM, it shares
// hangscope's memory and its thread pointer, so a libc wrapper there would write the errno and
// cancellation state of the thread it was cloned from. kRawSyscalls says whether this build has
// them (x86-64, no sanitizer: a sanitizer's runtime keeps per-thread state the child would
// share too); without them the watchdog is forked and the same calls go through libc.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace hangscope::native::raw {

// GCC says a sanitizer by macro, clang by __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HANGSCOPE_NO_RAW_SYSCALLS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define HANGSCOPE_NO_RAW_SYSCALLS 1
#endif
#endif
#if !defined(__x86_64__)
#define HANGSCOPE_NO_RAW_SYSCALLS 1
#endif

#ifndef HANGSCOPE_NO_RAW_SYSCALLS
inline constexpr bool kRawSyscalls = true;

// The kernel's answer: a value, or -errno.
inline long call(long number, long a = 0, long b = 0, long c = 0, long d = 0) {
  long result;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return result;
}
#else
inline constexpr bool kRawSyscalls = false;

// Through libc (the watchdog is a forked copy: its errno is its own); the same answer, -errno.
inline long call(long number, long a = 0, long b = 0, long c = 0, long d = 0) {
  const long result = ::syscall(number, a, b, c, d);
  return result == -1 ? -errno : result;
}
#endif

}  // namespace hangscope::native::raw

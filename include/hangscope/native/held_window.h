// The held window: the time during which hangscope may hold a target's threads in a ptrace stop.
// hangscope itself must not stop inside it, or those threads stay in `t` until it is continued.
#pragma once

#include <sys/types.h>

#include <chrono>

namespace hangscope::native {

// How long hangscope may stay stopped (state T: SIGSTOP, which cannot be caught) inside a held
// window before its watchdog SIGKILLs it; the kernel then detaches every tracee and they run on.
inline constexpr std::chrono::milliseconds kStoppedTracerBound{1000};

// Open while it lives. Windows nest, across threads too (one count per process: an agent or
// diagnose captures several processes at once). From the first open to the last close:
//  - SIGTSTP, SIGTTIN and SIGTTOU (Ctrl-Z, a background job touching its terminal) are caught
//    and held back, in whichever thread the kernel delivers them to; at the last close, after
//    every target thread was released, one that arrived is raised again, so hangscope stops
//    then, as the user asked, with nothing held;
//  - a watchdog process, forked at the first window of the process and idle (blocked in poll)
//    whenever no window is open, SIGKILLs hangscope if it stays stopped for longer than
//    kStoppedTracerBound.
// Open it before the first PTRACE_SEIZE and close it after the last tracee is detached (for a
// tracee that never stopped: after its tracing thread has exited).
class HeldWindow {
 public:
  HeldWindow() noexcept;
  ~HeldWindow();
  HeldWindow(const HeldWindow&) = delete;
  HeldWindow& operator=(const HeldWindow&) = delete;
  HeldWindow(HeldWindow&&) = delete;
  HeldWindow& operator=(HeldWindow&&) = delete;
};

// Starts the watchdog now, before any window, if none runs. A fork copies the page tables of all
// that is mapped so far, and while the watchdog lives every page that existed at the fork is
// copied again on its first write: forked while the process is still small (before a capture
// reads maps, opens modules and fills its heap), the watchdog costs a one-shot `dump` about
// 0.1 ms instead of 2. Never throws; the first window starts it otherwise.
void start_stop_watchdog() noexcept;

// The watchdog's pid while one runs, else 0 (none started yet, or fork failed).
pid_t stop_watchdog_pid() noexcept;

}  // namespace hangscope::native

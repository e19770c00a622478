// RAII ptrace stop of one thread: PTRACE_SEIZE + PTRACE_INTERRUPT, bounded wait, detach on every
// path.
#pragma once

#include <sys/types.h>

#include <chrono>

namespace hangscope::native {

enum class StopState {
  kNotSeized,  // nothing done yet, or seize refused
  kPending,    // seized and interrupted, not yet stopped
  kStopped,    // in a ptrace stop: registers and memory are stable
  kGone,       // the thread exited
  kReleased,   // detached again
  kAbandoned,  // never stopped in time; detached by the kernel when the tracing thread exits
};

// Must be used from one thread only: ptrace binds a tracee to the thread that seized it.
// If the thread cannot be detached (it never stopped, e.g. uninterruptible sleep), the kernel
// detaches it when the tracing thread exits; the freezer runs on a thread of its own for that.
class ThreadStop {
 public:
  explicit ThreadStop(pid_t tid) : tid_(tid) {}
  ~ThreadStop() { release(); }
  ThreadStop(const ThreadStop&) = delete;
  ThreadStop& operator=(const ThreadStop&) = delete;
  ThreadStop(ThreadStop&& other) noexcept;
  ThreadStop& operator=(ThreadStop&&) = delete;

  // Seizes and interrupts the thread; returns 0 or the errno (ESRCH gone, EPERM refused).
  int seize_and_interrupt();
  // Waits up to `budget` for the stop; returns the state reached (kStopped, kGone, kPending).
  StopState wait(std::chrono::nanoseconds budget);
  // Detaches (re-delivering a signal that arrived while stopping); safe to call repeatedly.
  void release();

  pid_t tid() const { return tid_; }
  StopState state() const { return state_; }
  // From the interrupt to the release (or to now while stopped).
  std::chrono::nanoseconds paused_for() const;

 private:
  StopState take_wait_status(int status);

  pid_t tid_;
  StopState state_ = StopState::kNotSeized;
  int signal_to_deliver_ = 0;
  std::chrono::steady_clock::time_point interrupted_at_{};
  std::chrono::steady_clock::time_point released_at_{};
};

}  // namespace hangscope::native

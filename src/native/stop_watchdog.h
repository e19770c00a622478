// The stop watchdog: a small child process that SIGKILLs hangscope when hangscope stays stopped
// (state T) for longer than a bound while it holds a target's threads (a held window is open).
// SIGSTOP cannot be caught or blocked; killing the tracer is the one way to get its tracees
// released, and the kernel does that for every tracee of a dying tracer.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hangscope::native {

class StopWatchdog {
 public:
  explicit StopWatchdog(std::chrono::milliseconds bound) : bound_(bound) {}
  ~StopWatchdog();
  StopWatchdog(const StopWatchdog&) = delete;
  StopWatchdog& operator=(const StopWatchdog&) = delete;

  // A held window opens: starts the watchdog if none runs (or the last one died) and tells it.
  // Never throws; without a watchdog (fork failed) the window is simply not guarded.
  void window_opened() noexcept;
  // Starts the watchdog, idle, if none runs (before any window; see start_stop_watchdog).
  void start_idle() noexcept;
  // The held window closed: the watchdog goes back to waiting.
  void window_closed() noexcept;
  // Ends and reaps the watchdog (at exit: an orphan would be left to init as a zombie).
  void stop() noexcept;
  pid_t pid() const noexcept { return child_; }

  // What the parent and the watchdog share: one anonymous MAP_SHARED page.
  struct Shared {
    std::atomic<std::uint32_t> open{0};        // a held window is open
    std::atomic<std::uint32_t> generation{0};  // counts the windows opened
    std::atomic<std::uint32_t> idle{0};        // the watchdog waits for a doorbell, no timeout
  };

  // What the watchdog starts from (copied onto its own stack when it shares our memory).
  struct WatchArguments {
    pid_t parent;
    int doorbell;   // the watchdog's end of the socket pair
    int other_end;  // the parent's end, closed in the watchdog
    Shared* shared;
    long long bound_ms;
  };

 private:
  bool running() noexcept;
  bool start() noexcept;
  pid_t launch(const WatchArguments& arguments) noexcept;
  void forget_child() noexcept;

  std::chrono::milliseconds bound_;
  Shared* shared_ = nullptr;
  int doorbell_ = -1;  // our end of a socket pair; the watchdog sees EOF when we are gone
  pid_t child_ = 0;
  pid_t owner_ = 0;  // the process that started it (a forked copy of that one must not kill it)
  void* stack_ = nullptr;  // the cloned watchdog's stack (and guard page), kept for the next one
  // A failed start is not retried at every window (each mode opens one per batch).
  std::chrono::steady_clock::time_point retry_after_{};
};

}  // namespace hangscope::native

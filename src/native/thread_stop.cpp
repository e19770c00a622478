#include "hangscope/native/thread_stop.h"

#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <thread>

namespace hangscope::native {

ThreadStop::ThreadStop(ThreadStop&& other) noexcept
    : tid_(other.tid_),
      state_(other.state_),
      signal_to_deliver_(other.signal_to_deliver_),
      interrupted_at_(other.interrupted_at_),
      released_at_(other.released_at_) {
  other.state_ = StopState::kNotSeized;
}

int ThreadStop::seize_and_interrupt() {
  if (::ptrace(PTRACE_SEIZE, tid_, nullptr, nullptr) != 0) return errno;
  interrupted_at_ = std::chrono::steady_clock::now();
  if (::ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0) {
    const int err = errno;
    state_ = err == ESRCH ? StopState::kGone : StopState::kPending;
    return err;
  }
  state_ = StopState::kPending;
  return 0;
}

StopState ThreadStop::take_wait_status(int status) {
  if (WIFEXITED(status) || WIFSIGNALED(status)) return state_ = StopState::kGone;
  if (!WIFSTOPPED(status)) return state_;
  const int event = status >> 16;
  const int signal = WSTOPSIG(status);
  // event 0 is a signal-delivery stop: the signal was on its way to the thread and must still
  // reach it, so it is handed back on detach. PTRACE_EVENT_STOP is our interrupt or a group stop.
  if (event == 0) signal_to_deliver_ = signal;
  return state_ = StopState::kStopped;
}

StopState ThreadStop::wait(std::chrono::nanoseconds budget) {
  if (state_ != StopState::kPending) return state_;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(tid_, &status, __WALL | WNOHANG);
    if (r == tid_) return take_wait_status(status);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return state_ = StopState::kGone;  // ECHILD: no longer our tracee
    if (std::chrono::steady_clock::now() >= deadline) return state_;
    // Most threads stop within tens of microseconds: spin (yielding) for the first 100 µs,
    // then poll every 20 µs. Every microsecond slept past the stop is time the thread stays
    // stopped, so the poll interval stays short; a thread that does not stop soon (state D)
    // is given up at the budget.
    if (std::chrono::steady_clock::now() - interrupted_at_ < std::chrono::microseconds(100)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void ThreadStop::release() {
  if (state_ == StopState::kStopped) {
    ::ptrace(PTRACE_DETACH, tid_, nullptr,
             reinterpret_cast<void*>(static_cast<long>(signal_to_deliver_)));
    released_at_ = std::chrono::steady_clock::now();
    state_ = StopState::kReleased;
  } else if (state_ == StopState::kPending) {
    // Not stopped: PTRACE_DETACH needs a stopped tracee. A last short wait catches a stop that
    // raced with the deadline; otherwise the tracer thread's exit detaches it.
    if (wait(std::chrono::microseconds(200)) == StopState::kStopped) {
      release();
      return;
    }
    released_at_ = std::chrono::steady_clock::now();
    state_ = StopState::kAbandoned;
  }
}

std::chrono::nanoseconds ThreadStop::paused_for() const {
  if (interrupted_at_ == std::chrono::steady_clock::time_point{}) return {};
  const auto end = state_ == StopState::kStopped ? std::chrono::steady_clock::now() : released_at_;
  if (end < interrupted_at_) return {};
  return end - interrupted_at_;
}

}  // namespace hangscope::native

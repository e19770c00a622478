#include "hangscope/native/held_window.h"

#include <signal.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <mutex>

#include "stop_watchdog.h"

namespace hangscope::native {
namespace {

// The job-control signals whose default action stops the process. SIGSTOP cannot be caught:
// the watchdog bounds that one.
constexpr std::array<int, 3> kJobControlSignals{SIGTSTP, SIGTTIN, SIGTTOU};

// Shared with the signal handler: lock-free atomics only.
std::atomic<bool> g_deferring{false};
std::array<std::atomic<bool>, kJobControlSignals.size()> g_arrived{};

int signal_slot(int sig) {
  for (std::size_t i = 0; i < kJobControlSignals.size(); ++i) {
    if (kJobControlSignals[i] == sig) return static_cast<int>(i);
  }
  return -1;
}

// Runs in whichever thread the kernel picked (a process-directed signal goes to any thread that
// does not block it, and hangscope's threads are not all its own: gRPC's, worker pools). Notes
// the signal; if the window closed meanwhile, the default action is back and the signal is
// raised again here, so it stops hangscope now.
extern "C" void defer_job_control_signal(int sig) {
  const int saved_errno = errno;
  const int slot = signal_slot(sig);
  if (slot >= 0) {
    g_arrived[slot].store(true);
    if (!g_deferring.load() && g_arrived[slot].exchange(false)) ::raise(sig);
  }
  errno = saved_errno;
}

class HeldWindows {
 public:
  void open() noexcept {
    std::lock_guard lock(mutex_);
    if (count_++ > 0) return;
    watchdog_.window_opened();  // forks the watchdog at the first window: before any seize
    g_deferring.store(true);
    install_handlers();
  }

  void close() noexcept {
    std::lock_guard lock(mutex_);
    if (--count_ > 0) return;
    restore_handlers();
    g_deferring.store(false);
    watchdog_.window_closed();
    // Every target thread is released. A signal held back takes effect now: raised in this
    // thread, it stops the process before this thread (holding the lock, so no other thread
    // either) can open another window; raise returns once hangscope is continued.
    for (std::size_t i = 0; i < kJobControlSignals.size(); ++i) {
      if (g_arrived[i].exchange(false)) ::raise(kJobControlSignals[i]);
    }
  }

  void start_watchdog() noexcept {
    std::lock_guard lock(mutex_);
    watchdog_.start_idle();
  }

  pid_t watchdog_pid() noexcept {
    std::lock_guard lock(mutex_);
    return watchdog_.pid();
  }

  // At exit, with no window open: the watchdog is reaped here rather than left to init.
  void end_watchdog() noexcept {
    std::lock_guard lock(mutex_);
    if (count_ == 0) watchdog_.stop();
  }

 private:
  // SA_RESTART: the other threads' system calls go on. A background hangscope that writes to
  // its terminal inside a window with `stty tostop` retries the write (the kernel signals the
  // process group again each time) until the window closes, then stops as it would have.
  void install_handlers() noexcept {
    struct sigaction defer {};
    defer.sa_handler = defer_job_control_signal;
    defer.sa_flags = SA_RESTART;
    sigemptyset(&defer.sa_mask);
    for (int sig : kJobControlSignals) sigaddset(&defer.sa_mask, sig);
    for (std::size_t i = 0; i < kJobControlSignals.size(); ++i) {
      installed_[i] = false;
      if (::sigaction(kJobControlSignals[i], nullptr, &saved_[i]) != 0) continue;
      if (saved_[i].sa_handler == SIG_IGN) continue;  // ignored already: it cannot stop us
      installed_[i] = ::sigaction(kJobControlSignals[i], &defer, nullptr) == 0;
    }
  }

  void restore_handlers() noexcept {
    for (std::size_t i = 0; i < kJobControlSignals.size(); ++i) {
      if (installed_[i]) ::sigaction(kJobControlSignals[i], &saved_[i], nullptr);
      installed_[i] = false;
    }
  }

  std::mutex mutex_;
  int count_ = 0;
  std::array<struct sigaction, kJobControlSignals.size()> saved_{};
  std::array<bool, kJobControlSignals.size()> installed_{};
  StopWatchdog watchdog_{kStoppedTracerBound};
};

// Never destroyed: a window may still close while static objects are torn down at exit.
HeldWindows& held_windows() {
  static HeldWindows* windows = new HeldWindows;
  return *windows;
}

// Destroyed when the process exits normally (main returned, or exit()).
struct WatchdogReaper {
  WatchdogReaper() = default;
  ~WatchdogReaper() { held_windows().end_watchdog(); }
  WatchdogReaper(const WatchdogReaper&) = delete;
  WatchdogReaper& operator=(const WatchdogReaper&) = delete;
};
const WatchdogReaper reaper;

}  // namespace

HeldWindow::HeldWindow() noexcept {
  held_windows().open();
}

HeldWindow::~HeldWindow() {
  held_windows().close();
}

void start_stop_watchdog() noexcept {
  held_windows().start_watchdog();
}

pid_t stop_watchdog_pid() noexcept {
  return held_windows().watchdog_pid();
}

}  // namespace hangscope::native

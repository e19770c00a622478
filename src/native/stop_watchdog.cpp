#include "stop_watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <new>

#include "raw_syscall.h"

namespace hangscope::native {
namespace {

// Everything below up to StopWatchdog's members runs in the watchdog. Where the build has raw
// system calls it is cloned with CLONE_VM: no page table is copied and no page of hangscope's is
// copied on write afterwards (a fork cost a one-shot dump about 0.4 ms), but it shares
// hangscope's memory and thread pointer. So it calls no libc function that keeps state (only
// raw::call, which writes no errno), allocates nothing, takes no lock, and writes nothing but
// its own stack. Elsewhere it is forked and makes the same calls through libc.

constexpr int kPollMs = 100;  // how often the parent's state is read while a window is open

// A fixed buffer that text and numbers are appended to without allocating.
struct Line {
  char text[256];
  std::size_t size = 0;
  void add(const char* s) {
    while (*s != '\0' && size + 1 < sizeof text) text[size++] = *s++;
    text[size] = '\0';
  }
  void add(long long value) {
    char digits[24];
    int n = 0;
    unsigned long long v = value < 0 ? 0ULL - static_cast<unsigned long long>(value)
                                     : static_cast<unsigned long long>(value);
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    if (value < 0) add("-");
    while (n > 0 && size + 1 < sizeof text) text[size++] = digits[--n];
    text[size] = '\0';
  }
};

long long now_ms() {
  timespec t{};
  raw::call(SYS_clock_gettime, CLOCK_MONOTONIC, reinterpret_cast<long>(&t));
  return static_cast<long long>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

long open_file(const char* path, int flags) {
  return raw::call(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), flags);
}

long read_into(int fd, char* buffer, std::size_t size) {
  return raw::call(SYS_read, fd, reinterpret_cast<long>(buffer), static_cast<long>(size));
}

[[noreturn]] void exit_now(int code) {
  for (;;) raw::call(SYS_exit_group, code);
}

// The state letter of /proc/PID/stat (R, S, D, T, t, Z, ...), or 0 when it cannot be read.
char process_state(const char* stat_path) {
  const long fd = open_file(stat_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buffer[512];
  const long n = read_into(static_cast<int>(fd), buffer, sizeof buffer);
  raw::call(SYS_close, fd);
  // "PID (COMM) STATE ...": the command may hold ')' itself, the numbers after it never do.
  for (long i = n - 1; i >= 0; --i) {
    if (buffer[i] == ')') return i + 2 < n ? buffer[i + 2] : 0;
  }
  return 0;
}

// Waits up to timeout_ms (-1: no limit) for a doorbell; false once the parent has gone (EOF:
// the kernel closed its end of the socket pair when its last thread exited).
bool wait_for_doorbell(int doorbell, int timeout_ms) {
  pollfd p{doorbell, POLLIN, 0};
  if (raw::call(SYS_poll, reinterpret_cast<long>(&p), 1, timeout_ms) <= 0) {
    return true;  // timeout, or EINTR
  }
  if ((p.revents & POLLIN) != 0) {
    char drained[64];
    const long n = read_into(doorbell, drained, sizeof drained);
    return n != 0 && !(n < 0 && n != -EINTR && n != -EAGAIN);
  }
  return (p.revents & (POLLHUP | POLLERR | POLLNVAL)) == 0;
}

// No window open: announce that the doorbell is needed, then wait for it without a timeout.
// The parent sets `open` before it reads `idle`, we set `idle` before we read `open` (both
// sequentially consistent), so one of us always sees the other.
bool wait_while_closed(int doorbell, StopWatchdog::Shared& shared) {
  shared.idle.store(1);
  bool parent_alive = true;
  if (shared.open.load() == 0) parent_alive = wait_for_doorbell(doorbell, -1);
  shared.idle.store(0);
  return parent_alive;
}

// The kernel's struct sigaction (rt_sigaction takes it, not libc's): a disposition, no restorer.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  unsigned long mask;
};

void set_disposition(int sig, void (*handler)(int)) {
  const KernelSigaction action{handler, 0, nullptr, 0};
  raw::call(SYS_rt_sigaction, sig, reinterpret_cast<long>(&action), 0, sizeof action.mask);
}

// Out of the parent's session (so a terminal's Ctrl-Z, Ctrl-C and hangup, which go to the
// foreground process group, never reach the watchdog), deaf to job control, with none of the
// parent's signal handlers (they would run on memory the watchdog may share), and holding none
// of the parent's files but stderr and the doorbell. Signals arrive blocked (start()) and are
// let in last.
void detach_from_parent(int doorbell) {
  raw::call(SYS_setsid);
  for (int sig = 1; sig < 65; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) set_disposition(sig, SIG_DFL);
  }
  for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU, SIGINT, SIGQUIT, SIGHUP, SIGPIPE}) {
    set_disposition(sig, SIG_IGN);
  }
  const long null = open_file("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    raw::call(SYS_dup2, null, STDIN_FILENO);
    raw::call(SYS_dup2, null, STDOUT_FILENO);
  }
  // Any other copy of the parent's descriptors (sockets, pipes to a caller) would hold them open.
  if (doorbell > 3) raw::call(SYS_close_range, 3, static_cast<unsigned>(doorbell) - 1, 0);
  raw::call(SYS_close_range, static_cast<unsigned>(doorbell) + 1, UINT_MAX, 0);
  raw::call(SYS_prctl, PR_SET_NAME, reinterpret_cast<long>("hangscope-watch"));
  const unsigned long none = 0;
  raw::call(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&none), 0, sizeof none);
}

[[noreturn]] void kill_stopped_parent(pid_t parent, long long stopped_ms) {
  raw::call(SYS_kill, parent, SIGKILL);
  Line line;
  line.add("hangscope: watchdog: hangscope (pid ");
  line.add(static_cast<long long>(parent));
  line.add(") was stopped for ");
  line.add(stopped_ms);
  line.add(" ms while it held a target's threads; killed it, so the kernel released them\n");
  raw::call(SYS_write, STDERR_FILENO, reinterpret_cast<long>(line.text),
            static_cast<long>(line.size));
  exit_now(0);
}

// Times how long the parent has been seen stopped inside one window.
struct StopTimer {
  long long since = -1;
  std::uint32_t generation = 0;
  // Returns how long the parent has been stopped in this window so far (-1: it runs).
  long long observe(bool stopped, std::uint32_t window) {
    if (!stopped) return since = -1;
    if (since < 0 || window != generation) {
      since = now_ms();
      generation = window;
    }
    return now_ms() - since;
  }
};

[[noreturn]] void watch(pid_t parent, int doorbell, StopWatchdog::Shared& shared,
                        long long bound_ms) {
  detach_from_parent(doorbell);
  Line stat_path;
  stat_path.add("/proc/");
  stat_path.add(static_cast<long long>(parent));
  stat_path.add("/stat");
  StopTimer timer;
  for (;;) {
    // A whole poll period after every wake-up, even if the window has closed meanwhile: the
    // windows of `each` mode follow each other within microseconds, and going idle between
    // them would cost a doorbell and a wake-up per window.
    if (!wait_for_doorbell(doorbell, kPollMs)) exit_now(0);
    if (shared.open.load() == 0) {
      timer.observe(false, 0);
      if (!wait_while_closed(doorbell, shared)) exit_now(0);
      continue;
    }
    const std::uint32_t window = shared.generation.load();
    const char state = process_state(stat_path.text);
    if (state == 0 || state == 'Z' || state == 'X') exit_now(0);
    // T is a group stop (SIGSTOP, or a job-control signal hangscope did not catch); a ptrace
    // stop by a debugger shows t and is left alone.
    const long long stopped_ms = timer.observe(state == 'T' && shared.open.load() != 0, window);
    if (stopped_ms < bound_ms) continue;
    // Still the same window, and still our parent (not a reused pid after it died).
    if (shared.open.load() == 0 || shared.generation.load() != window) continue;
    if (raw::call(SYS_getppid) != parent) exit_now(0);
    kill_stopped_parent(parent, stopped_ms);
  }
}

using WatchArguments = StopWatchdog::WatchArguments;

[[noreturn]] void start_watching(const WatchArguments& args) {
  raw::call(SYS_close, args.other_end);  // only the parent may hold it: its death is EOF
  watch(args.parent, args.doorbell, *args.shared, args.bound_ms);
}

// Unused where the watchdog is forked (a sanitizer build).
[[maybe_unused]] int cloned_watchdog(void* arguments) {
  start_watching(*static_cast<const WatchArguments*>(arguments));
}

// The watchdog's stack when it shares hangscope's memory: its code needs a few KiB; a page
// without access below it stops an overflow from writing hangscope's memory.
constexpr std::size_t kWatchdogStack = 64 * 1024;
constexpr std::size_t kGuardPage = 4096;

}  // namespace

StopWatchdog::~StopWatchdog() {
  stop();
  if (shared_ != nullptr) ::munmap(shared_, sizeof(Shared));
  if (stack_ != nullptr) ::munmap(stack_, kWatchdogStack + kGuardPage);  // its user is reaped
}

pid_t StopWatchdog::launch(const WatchArguments& arguments) noexcept {
  // Blocked until the watchdog has dropped every handler of ours (detach_from_parent): a
  // handler of hangscope's run in the watchdog would write memory the two may share.
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t child = -1;
  if constexpr (raw::kRawSyscalls) {
    if (stack_ == nullptr) {
      void* stack = ::mmap(nullptr, kWatchdogStack + kGuardPage, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
      if (stack != MAP_FAILED && ::mprotect(stack, kGuardPage, PROT_NONE) == 0) {
        stack_ = stack;
      } else if (stack != MAP_FAILED) {
        ::munmap(stack, kWatchdogStack + kGuardPage);
      }
    }
    if (stack_ != nullptr) {
      auto* top = static_cast<std::byte*>(stack_) + kGuardPage + kWatchdogStack;
      auto* copy = new (top - 64) WatchArguments(arguments);  // 16-byte aligned, below the top
      child = ::clone(cloned_watchdog, copy, CLONE_VM | SIGCHLD, copy);
    }
  } else {
    child = ::fork();
    if (child == 0) start_watching(arguments);
  }
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  return child;
}

void StopWatchdog::stop() noexcept {
  if (child_ <= 0) return;
  if (::getpid() != owner_) {  // a fork of the owner exiting: the watchdog is not ours
    forget_child();
    return;
  }
  ::kill(child_, SIGKILL);  // ends it even if someone stopped it
  while (::waitpid(child_, nullptr, 0) < 0 && errno == EINTR) {
  }
  forget_child();
}

void StopWatchdog::window_opened() noexcept {
  if (!running() && !start()) return;
  shared_->generation.fetch_add(1);
  shared_->open.store(1);
  if (shared_->idle.load() != 0) {
    const char bell = 1;  // a full buffer means a bell is already waiting: nothing lost
    ::send(doorbell_, &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

void StopWatchdog::start_idle() noexcept {
  if (!running()) start();
}

void StopWatchdog::window_closed() noexcept {
  if (shared_ != nullptr) shared_->open.store(0);
}

bool StopWatchdog::running() noexcept {
  if (child_ <= 0) return false;
  int status = 0;
  if (::waitpid(child_, &status, WNOHANG) == 0) return true;
  forget_child();  // it died (and is reaped now), or was reaped by someone else
  return false;
}

// The child is reaped (or not ours): its stack can go, or be used by the next one.
void StopWatchdog::forget_child() noexcept {
  if (doorbell_ >= 0) ::close(doorbell_);
  doorbell_ = -1;
  child_ = 0;
}

bool StopWatchdog::start() noexcept {
  const auto now = std::chrono::steady_clock::now();
  if (now < retry_after_) return false;
  retry_after_ = now + std::chrono::seconds(10);  // until this start succeeds
  if (shared_ == nullptr) {
    void* page =
        ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return false;
    shared_ = new (page) Shared;
  }
  shared_->open.store(0);
  shared_->idle.store(0);
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return false;
  const pid_t parent = ::getpid();
  const pid_t child = launch({parent, ends[1], ends[0], shared_, bound_.count()});
  ::close(ends[1]);
  if (child < 0) {
    ::close(ends[0]);
    return false;
  }
  doorbell_ = ends[0];
  child_ = child;
  owner_ = parent;
  retry_after_ = {};
  return true;
}

}  // namespace hangscope::native

// Test helper: starts a target process in its own process group and always cleans it up.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace hangscope::testing {

class TargetProcess {
 public:
  // Starts argv[0] with argv; the child dies with the test (PR_SET_PDEATHSIG) and gets its own
  // process group so that everything it starts is killed with it.
  explicit TargetProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& extra_env = {});
  ~TargetProcess();
  TargetProcess(const TargetProcess&) = delete;
  TargetProcess& operator=(const TargetProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The first stdout line (seen before or read now) that starts with `prefix`; throws on EOF
  // or timeout. Lines are never consumed, so the order in which a target prints does not matter.
  std::string wait_for_line(const std::string& prefix,
                            std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Everything read from stdout so far.
  const std::string& output() const { return output_; }
  // SIGKILLs the process group and reaps the child.
  void kill_all();
  // Reaps the child if it has exited; returns true when it has.
  bool try_reap();
  // The exit code once reaped (try_reap), or -1 (still running, or killed by a signal).
  int exit_code() const { return exit_code_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string output_;
  std::string pending_;
  std::vector<std::string> lines_;
  bool reaped_ = false;
  int exit_code_ = -1;
};

// State letter of every thread of pid, from /proc (empty map when the process is gone).
std::map<pid_t, char> thread_states(pid_t pid);

// Waits until at most `running` threads of pid are runnable (state R), seen twice 20 ms apart:
// a target that printed "ready" from a thread that then parks is read at one settled moment,
// not mid-way (a capture racing that thread's last steps fails under load). False on timeout.
bool wait_until_settled(pid_t pid, std::size_t running = 0,
                        std::chrono::milliseconds timeout = std::chrono::seconds(30));

// True when no thread of pid is in a stop (T or t).
bool no_thread_stopped(pid_t pid);

// Polls until pred() or timeout; returns pred()'s last value.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    struct timespec t {
      0, 2000000
    };
    nanosleep(&t, nullptr);
  }
  return pred();
}

// Path of a fresh temporary file name under /tmp (not created).
std::string temp_path(const std::string& stem);

}  // namespace hangscope::testing

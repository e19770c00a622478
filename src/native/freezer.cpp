#include "hangscope/native/freezer.h"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "hangscope/common/error.h"
#include "hangscope/native/held_window.h"
#include "hangscope/native/thread_stop.h"

namespace hangscope::native {
namespace {

// Named so that it can be told apart in /proc (and in the tests that look for a capture).
void name_tracer_thread() {
  ::pthread_setname_np(::pthread_self(), "hangscope-trace");
}

std::string stop_failure(pid_t pid, pid_t tid, int err, const proc::ProcessFs& fs) {
  std::string why;
  if (err == EPERM) {
    const auto status = fs.task_status(tid);
    if (status && status->tracer_pid != 0) {
      why = "another tracer (pid " + std::to_string(status->tracer_pid) + ") holds it";
    } else {
      why = "not permitted (needs CAP_SYS_PTRACE, or Yama ptrace_scope forbids it)";
    }
  } else {
    why = errno_message("ptrace", err);
  }
  return "cannot stop thread " + std::to_string(tid) + " of pid " + std::to_string(pid) + ": " +
         why;
}

// Copies registers and the live part of the stack of a stopped thread.
void copy_stopped_thread(ThreadCopy& copy, const proc::MemoryMap& maps,
                         memory::MemoryReader& memory, std::size_t max_bytes) {
  if (const int err = read_registers(copy.tid, copy.registers); err != 0) {
    copy.error = errno_message("cannot read registers", err);
    return;
  }
  const std::uint64_t sp = copy.registers.stack_pointer();
  const std::uint64_t start = sp > RegisterSet::kRedZone ? sp - RegisterSet::kRedZone : sp;
  std::uint64_t end = start + max_bytes;
  if (const proc::Mapping* m = maps.find(sp)) end = std::min(end, m->end);
  copy.stack.resize(end > start ? end - start : 0);
  copy.stack.resize(memory.read(start, copy.stack.data(), copy.stack.size()));
  copy.stack_start = start;
  copy.copied = true;
}

// Runs on the tracer thread. A held window is open from the first seize of a batch (kEachThread)
// or of the capture (kAllThreads) until its threads are released; `lingering` keeps one open
// past that when a thread never stopped: it stays seized until the tracer thread exits.
class Freezer {
 public:
  Freezer(const proc::ProcessFs& fs, const proc::MemoryMap& maps, memory::MemoryReader& memory,
          const FreezeOptions& options, std::optional<HeldWindow>& lingering)
      : fs_(fs),
        maps_(maps),
        memory_(memory),
        options_(options),
        deadline_(std::chrono::steady_clock::now() + options.process_budget),
        lingering_(lingering) {}
  // An exception left stops behind: released here, before the window closes.
  ~Freezer() {
    release_list(pending_);
    release_list(held_);
  }
  Freezer(const Freezer&) = delete;
  Freezer& operator=(const Freezer&) = delete;

  FreezeResult run() {
    const auto begin = std::chrono::steady_clock::now();
    for (int round = 0; round < options_.max_list_rounds; ++round) {
      int err = 0;
      const auto tids = fs_.list_tasks(&err);
      if (!tids) {
        if (round == 0) throw_errno("cannot list threads of pid " + std::to_string(fs_.pid()), err);
        break;  // the process went away mid-capture: keep what was copied
      }
      std::vector<pid_t> fresh;
      for (pid_t tid : *tids) {
        if (seen_.insert(tid).second) fresh.push_back(tid);
      }
      if (fresh.empty()) break;
      if (round + 1 == options_.max_list_rounds) {
        result_.notes.push_back("threads kept appearing; stopped re-listing after " +
                                std::to_string(options_.max_list_rounds) + " rounds");
      }
      capture_round(fresh);
    }
    if (options_.mode == StopMode::kAllThreads && options_.while_all_stopped) {
      options_.while_all_stopped();
    }
    release_all();
    result_.wall = std::chrono::steady_clock::now() - begin;
    std::sort(result_.threads.begin(), result_.threads.end(),
              [](const ThreadCopy& a, const ThreadCopy& b) { return a.tid < b.tid; });
    return std::move(result_);
  }

 private:
  void capture_round(const std::vector<pid_t>& tids) {
    for (pid_t tid : tids) {
      ThreadCopy copy;
      copy.tid = tid;
      const auto stat = fs_.task_stat(tid);
      if (!stat) continue;  // exited before we looked: not a thread of this capture
      copy.stat = *stat;
      copy.wchan = fs_.task_wchan(tid);
      if (const auto status = fs_.task_status(tid)) {
        copy.context_switches = status->voluntary_switches + status->involuntary_switches;
        if (!status->ns_pids.empty()) copy.ns_tid = status->ns_pids.back();
      }
      if (stat->state == 'Z' || stat->state == 'X') {
        copy.error = "thread has exited (zombie)";
        result_.threads.push_back(std::move(copy));
        continue;
      }
      if (std::chrono::steady_clock::now() >= deadline_) {
        copy.error = "not stopped: the process's capture budget of " +
                     std::to_string(options_.process_budget.count()) + " ms was spent";
        result_.threads.push_back(std::move(copy));
        continue;
      }
      if (!window_) window_.emplace();  // before the first seize of the batch
      ThreadStop stop(tid);
      if (const int err = stop.seize_and_interrupt(); err != 0) {
        if (err == ESRCH) continue;  // exited between listing and stopping
        copy.error = stop_failure(fs_.pid(), tid, err, fs_);
        result_.threads.push_back(std::move(copy));
        continue;
      }
      pending_.emplace_back(result_.threads.size(), std::move(stop));
      result_.threads.push_back(std::move(copy));
      if (options_.mode == StopMode::kEachThread &&
          pending_.size() >= std::max<std::size_t>(options_.each_thread_batch, 1)) {
        finish_pending();
      }
    }
    finish_pending();
  }

  // Waits for every pending stop, copies each stopped thread; in kEachThread mode releases it.
  void finish_pending() {
    for (auto& [index, stop] : pending_) {
      ThreadCopy& copy = result_.threads[index];
      switch (stop.wait(options_.stop_timeout)) {
        case StopState::kStopped:
          copy_stopped_thread(copy, maps_, memory_, options_.max_stack_bytes);
          break;
        case StopState::kGone:
          copy.error = "thread exited during capture";
          break;
        default:
          copy.error =
              "thread did not stop within " + std::to_string(options_.stop_timeout.count()) +
              " ms (state " + std::string(1, copy.stat.state) +
              (copy.wchan.empty() ? "" : ", waiting in " + copy.wchan) + "); not waited on";
          break;
      }
      if (options_.mode == StopMode::kEachThread) release(index, stop);
    }
    if (options_.mode == StopMode::kEachThread) {
      pending_.clear();
      window_.reset();  // the batch is released: nothing held until the next seize
    } else {
      for (auto& entry : pending_) held_.push_back(std::move(entry));
      pending_.clear();
    }
  }

  void release(std::size_t index, ThreadStop& stop) {
    stop.release();
    if (stop.state() == StopState::kAbandoned && !lingering_) lingering_.emplace();
    result_.threads[index].paused = stop.paused_for();
    result_.max_paused = std::max(result_.max_paused, result_.threads[index].paused);
  }

  void release_list(std::vector<std::pair<std::size_t, ThreadStop>>& stops) {
    for (auto& [index, stop] : stops) release(index, stop);
    stops.clear();
  }

  void release_all() {
    release_list(held_);
    window_.reset();
  }

  const proc::ProcessFs& fs_;
  const proc::MemoryMap& maps_;
  memory::MemoryReader& memory_;
  const FreezeOptions& options_;
  std::chrono::steady_clock::time_point deadline_;
  std::optional<HeldWindow>& lingering_;
  FreezeResult result_;
  std::set<pid_t> seen_;
  std::optional<HeldWindow> window_;  // declared before the stops: closed after they are released
  std::vector<std::pair<std::size_t, ThreadStop>> pending_;
  std::vector<std::pair<std::size_t, ThreadStop>> held_;
};

}  // namespace

FreezeResult freeze_and_copy(const proc::ProcessFs& fs, const proc::MemoryMap& maps,
                             memory::MemoryReader& memory, const FreezeOptions& options) {
  FreezeResult result;
  std::exception_ptr failure;
  std::optional<HeldWindow> lingering;  // closed only once the tracer thread has exited
  std::thread tracer([&] {
    name_tracer_thread();
    try {
      result = Freezer(fs, maps, memory, options, lingering).run();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  tracer.join();
  lingering.reset();
  if (failure) std::rethrow_exception(failure);
  return result;
}

std::optional<std::chrono::nanoseconds> while_thread_stopped(
    pid_t tid, std::chrono::milliseconds timeout, const std::function<void()>& while_stopped) {
  std::optional<std::chrono::nanoseconds> paused;
  std::exception_ptr failure;
  {
    HeldWindow window;  // open until the tracer thread has exited (a thread that never stopped)
    std::thread tracer([&] {
      name_tracer_thread();
      ThreadStop stop(tid);
      if (stop.seize_and_interrupt() != 0 || stop.wait(timeout) != StopState::kStopped) return;
      try {
        while_stopped();
      } catch (...) {
        failure = std::current_exception();
      }
      paused = stop.paused_for();
      stop.release();
    });
    tracer.join();
  }
  if (failure) std::rethrow_exception(failure);
  return paused;
}

}  // namespace hangscope::native

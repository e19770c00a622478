// A node watched without stopping anything (`hangscope watch`, docs/watch.md): each observation
// reads the rank processes' /proc facts, their Python stacks from memory while they run (a first
// and a last read, probes between), and their process groups' sequence numbers. A process is
// described once, by a Python-only capture (identity, groups; no thread stopped), and its
// interpreter stays open between observations, so an observation costs reads only.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/capture/process_selection.h"
#include "hangscope/elf/module_cache.h"
#include "hangscope/model/node_snapshot.h"

namespace hangscope::capture {

struct ObserveOptions {
  ProcessSelection selection;  // as a capture's
  // From the first read to the last; probes are spread over it (one per equal slot).
  std::chrono::nanoseconds window{0};
  int probes = 8;
};

// The fact a zombie's exit leaves (`process.exit`): "exit status 1", "killed by signal 9".
inline constexpr const char* kProcessExitFact = "process.exit";

class NodeObserver {
 public:
  NodeObserver();
  ~NodeObserver();
  NodeObserver(const NodeObserver&) = delete;
  NodeObserver& operator=(const NodeObserver&) = delete;

  // One observation: the window's first and last reads as two samples (sample_index 0 and 1;
  // the probes between them on the last one's threads, as in a sample series). Python threads
  // carry their frames (no native frames, nothing stopped); every process its state and CPU
  // times; a rank its groups with their sequence numbers. A process that exited but is not yet
  // reaped (a zombie) is in both with state Z and its exit in facts[kProcessExitFact].
  // `wait_until` waits for a moment (unix ns) and says false to stop: nullopt then.
  // One observation at a time (the agent serialises them).
  std::optional<std::array<model::NodeSnapshot, 2>> observe(
      const ObserveOptions& options, const std::function<bool(std::int64_t)>& wait_until);

  // Processes described so far and still watched (for tests and logs).
  std::size_t watched() const;

 private:
  struct Watched;
  struct Discovery;
  std::vector<pid_t> candidates(const ObserveOptions& options);
  void describe_new(const std::vector<pid_t>& pids, const ObserveOptions& options);

  std::map<pid_t, std::unique_ptr<Watched>> processes_;
  std::unique_ptr<Discovery> discovery_;
  std::shared_ptr<elf::ModuleCache> modules_;  // parsed libraries, shared by the processes
  // The last observation's last read: the next window's first when it follows at once.
  std::optional<model::NodeSnapshot> last_read_;
  std::vector<pid_t> last_pids_;
};

}  // namespace hangscope::capture

// Private to capture: non-stopping probes of one process's Python threads between two samples,
// tallied against the threads' stacks at the earlier sample (docs/analysis.md, "Progress
// evidence").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/elf/module_cache.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/model/node_snapshot.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/proc/process_fs.h"
#include "python_session.h"

namespace hangscope::capture {

// The frames a probe compares: the function and the line, outermost first.
struct ProbedFrame {
  std::string file;
  std::string function;
  int line = 0;
};

// How many of `reference`'s frames (outermost first) `seen` (outermost first) still stands in:
// the same function at every depth, called at the same line at every depth but the innermost
// one kept (a wait that polls moves between lines of its own frame).
std::uint32_t frames_kept(const std::vector<ProbedFrame>& reference,
                          const std::vector<ProbedFrame>& seen);

// The frames of a thread's Python stack as probes compare them, outermost first.
std::vector<ProbedFrame> outermost_first(const std::vector<python::PyFrame>& frames);
std::vector<ProbedFrame> outermost_first(const model::FrameList& frames);

// The tallies of probes of one process's watched threads against each one's reference stack:
// shared by the probes between a series' samples (ProcessProbe) and the observations of watch
// (NodeObserver).
class ProbeTallies {
 public:
  // Watches a thread (by its interpreter thread id) against `reference`, outermost first.
  void watch(std::uint64_t thread_id, std::vector<ProbedFrame> reference);
  void clear() { threads_.clear(); }
  bool empty() const { return threads_.empty(); }
  // One probe: `read` reads every Python thread while the process runs. A thread that seems to
  // stand outside part of its reference is read once more at once and counts only when both
  // reads agree (a read that caught a spinning thread's frame chain mid-change is not
  // repeated; a thread that left its wait is still there a moment later). A torn read, or one
  // that ends elsewhere than the thread's outermost frame, counts for nothing.
  void probe(const std::function<std::vector<python::PyThread>()>& read);
  // A watched thread's tally; nullptr when it is not watched or no probe read it.
  const model::ProbeTally* tally(std::uint64_t thread_id) const;

 private:
  std::optional<std::uint32_t> kept_by(const python::PyThread& t) const;
  struct Watched {
    std::vector<ProbedFrame> reference;
    model::ProbeTally tally;
  };
  std::map<std::uint64_t, Watched> threads_;  // by interpreter thread id (pthread_t)
};

class ProcessProbe {
 public:
  // Watches the Python threads `record` (a sample just taken) shows with frames; nullptr when it
  // has none or the process cannot be read again (gone, or no interpreter found).
  static std::unique_ptr<ProcessProbe> open(const model::ProcessRecord& record,
                                            std::shared_ptr<elf::ModuleCache> modules);

  // One read of every watched thread, while the process runs. A read that fails or catches a
  // thread mid-change counts for nothing.
  void probe();

  // Each watched thread's tally, given to the same thread in `next` (the following sample of
  // the same process: same pid and start time); nothing when it is another process.
  void attach(model::ProcessRecord& next) const;

 private:
  ProcessProbe(const model::ProcessRecord& record, proc::MemoryMap maps,
               std::shared_ptr<elf::ModuleCache> modules);
  std::vector<python::PyThread> read();

  pid_t pid_;
  std::uint64_t start_time_ticks_;
  proc::ProcessFs fs_;
  elf::ProcessImage image_;
  memory::ProcessMemory memory_;
  std::unique_ptr<PythonSession> python_;
  ProbeTallies tallies_;
};

}  // namespace hangscope::capture

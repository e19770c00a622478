// Private to capture: non-stopping probes of one process's Python threads between two samples,
// tallied against the threads' stacks at the earlier sample (docs/analysis.md, "Progress
// evidence").
#pragma once

#include <sys/types.h>

#include <cstdint>
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
  struct Watched {
    std::vector<ProbedFrame> reference;  // at the earlier sample, outermost first
    model::ProbeTally tally;
  };
  ProcessProbe(const model::ProcessRecord& record, proc::MemoryMap maps,
               std::shared_ptr<elf::ModuleCache> modules);
  std::vector<python::PyThread> read();
  // The frames of its reference a read of a watched thread kept; nullopt when the thread is not
  // watched or the read of it is torn.
  std::optional<std::uint32_t> kept_by(const python::PyThread& t) const;

  pid_t pid_;
  std::uint64_t start_time_ticks_;
  proc::ProcessFs fs_;
  elf::ProcessImage image_;
  memory::ProcessMemory memory_;
  std::unique_ptr<PythonSession> python_;
  std::map<std::uint64_t, Watched> threads_;  // by pthread id (the interpreter's thread id)
};

}  // namespace hangscope::capture

// Private to capture: one process's interpreter, its layout, and reads of its Python threads.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/common/diagnostic.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/python/async_tasks.h"
#include "hangscope/python/asyncio_debug.h"
#include "hangscope/python/group_discovery.h"
#include "hangscope/python/interpreter.h"
#include "hangscope/python/layout.h"
#include "hangscope/python/objects.h"
#include "hangscope/python/stack_reader.h"

namespace hangscope::capture {

class PythonSession {
 public:
  // Finds the interpreter and its layout; nullptr with the reason in *note when there is none
  // (kNotPython, kPythonUnsupported, kPythonUnreadable) so the capture goes on with native stacks.
  // `image` and `memory` must outlive the session.
  static std::unique_ptr<PythonSession> open(elf::ProcessImage& image, memory::MemoryReader& memory,
                                             Diagnostic* note);

  const python::Interpreter& interpreter() const { return interpreter_; }

  // Reads every Python thread; retries when a walk broke (the process kept running).
  // Throws hangscope::Error when the interpreter cannot be read at all.
  // `names`: threading's names of the threads (a dict walk; probes do without).
  std::vector<python::PyThread> read_threads(bool locals, int attempts, bool names = true);

  // torch.distributed's groups in the process (nullopt: never imported). Read once, before the
  // threads: their frames' locals then show the groups they name ("<process group 3>").
  // `tasks`: asyncio.tasks is looked up in the same walk of sys.modules (read_tasks follows).
  std::optional<model::DistributedState> read_process_groups(bool tasks);

  // The sequence numbers of `state`'s groups (read by read_process_groups) read again.
  void refresh_sequences(model::DistributedState& state);

  // The groups the locals of the threads read so far named outside torch's registry (and the
  // stores of registry groups they named), added to `state` (created when torch's registry
  // gave none). Their stores are read here, with libtorch's symbols: call it once every thread
  // runs again.
  void add_groups_found(std::optional<model::DistributedState>& state);

  // asyncio's tasks and which of `threads` runs each loop (nullopt: asyncio never imported).
  std::optional<python::AsyncTasks> read_tasks(const std::vector<python::PyThread>& threads,
                                               bool locals);

 private:
  PythonSession(python::Interpreter interpreter, python::Layout layout, elf::ProcessImage& image,
                memory::MemoryReader& memory)
      : interpreter_(std::move(interpreter)),
        layout_(std::move(layout)),
        image_(image),
        memory_(memory),
        maps_(image.maps()) {}

  python::Interpreter interpreter_;
  python::Layout layout_;
  elf::ProcessImage& image_;  // 3.14+: where _asyncio's .AsyncioDebug table is looked up
  memory::MemoryReader& memory_;
  const proc::MemoryMap& maps_;
  std::map<std::uint64_t, std::string> group_labels_;
  python::CodeCache codes_;  // code objects decoded by this session's reads
  // Groups met in frames' locals (read with locals only), labelled in group_labels_.
  std::unique_ptr<python::GroupDiscovery> groups_found_;
  // asyncio.tasks, looked up with the process groups' modules when tasks are read: nullopt
  // inside when asyncio was not imported then; unset until looked up.
  std::optional<std::optional<std::uint64_t>> tasks_module_;
  // 3.14+: _asyncio's .AsyncioDebug table, looked up with the modules (read_process_groups).
  std::optional<python::AsyncioDebugTable> asyncio_debug_;
};

}  // namespace hangscope::capture

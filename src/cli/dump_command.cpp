// `hangscope dump --pid PID | --core FILE`: every thread's stack of one live process, or of one
// process from its core file, as text or JSON.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "hangscope/capture/core_capture.h"
#include "hangscope/capture/process_capture.h"
#include "hangscope/cli/commands.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/error.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/report/dump_format.h"

namespace hangscope::cli {
namespace {

struct DumpArguments {
  int pid = 0;
  bool json = false;
  std::string stop_mode = "each";
  std::size_t max_stack_kib = 512;
  int stop_timeout_ms = 100;
  bool native_only = false;
  bool python_only = false;
  bool locals = false;
  std::string core;     // --core FILE
  std::string exe;      // --exe PATH (with --core)
  std::string sysroot;  // --sysroot DIR (with --core)
  bool tasks = false;
  bool sockets = false;  // --sockets
};

capture::StackKinds stack_kinds(const DumpArguments& args) {
  return args.native_only   ? capture::StackKinds::kNativeOnly
         : args.python_only ? capture::StackKinds::kPythonOnly
                            : capture::StackKinds::kMerged;
}

model::ProcessDump dump_core(const DumpArguments& args) {
  capture::CoreOptions options;
  options.executable = args.exe;
  options.sysroot = args.sysroot;
  options.stacks = stack_kinds(args);
  options.locals = args.locals;
  options.tasks = args.tasks;
  options.task_locals = args.tasks && args.locals;
  return capture::capture_core(args.core, options);
}

model::ProcessDump dump_live(const DumpArguments& args) {
  capture::CaptureOptions options;
  options.freeze.mode =
      args.stop_mode == "all" ? native::StopMode::kAllThreads : native::StopMode::kEachThread;
  options.freeze.max_stack_bytes = args.max_stack_kib * 1024;
  options.freeze.stop_timeout = std::chrono::milliseconds(args.stop_timeout_ms);
  options.stacks = stack_kinds(args);
  options.locals = args.locals;
  options.tasks = args.tasks;
  options.task_locals = args.tasks && args.locals;
  options.sockets = args.sockets;
  // ptrace cannot attach to its caller: say so instead of the capture's guess (privileges).
  if (args.pid == ::getpid()) {
    throw Error("pid " + std::to_string(args.pid) +
                " is hangscope itself: a process cannot trace itself");
  }
  return capture::capture_process(args.pid, options);
}

int run_dump(const DumpArguments& args) {
  if ((args.pid == 0) == args.core.empty()) {
    throw UsageError("give one process: --pid PID (live) or --core FILE (a core file)");
  }
  PhaseTimer phases("dump, ");
  const auto dump = args.core.empty() ? dump_live(args) : dump_core(args);
  phases.lap("captured, the target closed");
  if (args.json) {
    auto json = report::dump_to_json(dump);
    if (!args.sockets) json.erase("sockets");  // not read: absent, not empty
    // A byte of the target that is not UTF-8 becomes U+FFFD, never an exception.
    std::cout << json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << report::dump_to_text(dump);
  }
  phases.lap("printed");
  return kExitOk;
}

}  // namespace

const Command& dump_command() {
  static const Command command{"dump", "Print every thread's stack of one process",
                               register_dump_command};
  return command;
}

CommandRunner register_dump_command(CLI::App& app) {
  auto args = std::make_shared<DumpArguments>();
  auto* pid = app.add_option("--pid,-p", args->pid, "Process to capture")->check(pid_validator());
  auto* core = app.add_option("--core", args->core,
                              "A core file (kernel-written or gcore) to read instead of a live "
                              "process: thread states are unknown in a core")
                   ->excludes(pid);
  app.add_option("--exe", args->exe,
                 "With --core: the program's executable, when the path the core names does not "
                 "hold it")
      ->needs(core);
  app.add_option("--sysroot", args->sysroot,
                 "With --core: a directory holding the crashed machine's files (libraries are "
                 "opened at DIR/PATH)")
      ->needs(core);
  app.add_flag("--json", args->json, "Print the dump as JSON (keys as in docs/cli.md)");
  auto* native_only =
      app.add_flag("--native-only", args->native_only, "Native stacks only: no interpreter reads");
  app.add_flag("--python-only", args->python_only,
               "Python stacks only, read without stopping any thread")
      ->excludes(native_only);
  app.add_flag("--locals", args->locals,
               "Python locals of every frame (simple values; secrets masked)");
  app.add_flag("--tasks", args->tasks,
               "asyncio tasks of every event loop (name, state, coroutine chain, what each "
               "awaits), under the thread that runs their loop")
      ->excludes(native_only);
  app.add_flag("--sockets", args->sockets,
               "The unix and TCP sockets it holds (peers, addresses, queues); read after every "
               "thread is released")
      ->excludes(core);
  app.add_option("--stop-mode", args->stop_mode,
                 "each: stop up to 8 threads at a time, release each once copied (shortest pause); "
                 "all: stop every thread at once")
      ->check(CLI::IsMember({"each", "all"}))
      ->capture_default_str()
      ->excludes(core);
  app.add_option("--max-stack-kib", args->max_stack_kib, "Stack bytes copied per thread, in KiB")
      ->check(CLI::Range(4, 65536))
      ->capture_default_str()
      ->excludes(core);
  app.add_option("--stop-timeout-ms", args->stop_timeout_ms,
                 "Longest wait for one thread to stop (threads in state D may never stop)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str()
      ->excludes(core);
  app.footer(
      "Examples:\n"
      "  hangscope dump --pid 1234\n"
      "  hangscope dump --pid 1234 --locals\n"
      "  hangscope dump --pid 1234 --tasks --stop-mode all   # asyncio tasks, one instant\n"
      "  hangscope dump --pid 1234 --python-only   # nothing is stopped\n"
      "  hangscope dump --pid 1234 --json > rank0.json\n"
      "  hangscope dump --pid 1234 --sockets          # and the sockets it holds\n"
      "  hangscope dump --core core.1234                # a dead process\n"
      "  hangscope dump --core core.1234 --sysroot /srv/node7-root");
  return [args] { return run_dump(*args); };
}

}  // namespace hangscope::cli

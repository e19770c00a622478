#include "hangscope/capture/core_capture.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "hangscope/common/error.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/common/redaction.h"
#include "hangscope/elf/core_file.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/identity/environment.h"
#include "hangscope/identity/rank_identity.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/native/registers.h"
#include "python_session.h"
#include "record_identity.h"
#include "thread_assembly.h"

namespace hangscope::capture {
namespace {

// The core's own bytes, and where the core filter left a mapping out (code, read-only data),
// the bytes of the file mapped there: what the process would have read.
class CoreMemory final : public memory::MemoryReader {
 public:
  CoreMemory(elf::CoreFile& core, elf::ProcessImage& image) : core_(core), image_(image) {}

  std::size_t read(std::uint64_t address, void* out, std::size_t size) override {
    auto* bytes = static_cast<std::byte*>(out);
    std::size_t done = 0;
    while (done < size) {
      std::size_t n = core_.read(address + done, bytes + done, size - done);
      if (n == 0) n = image_.read_file_backed(address + done, bytes + done, size - done);
      if (n == 0) break;
      done += n;
    }
    return done;
  }

 private:
  elf::CoreFile& core_;
  elf::ProcessImage& image_;
};

std::string signal_name(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  return abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(signal);
}

int signal_of(const elf::CoreFile& core, pid_t tid) {
  for (const auto& t : core.threads()) {
    if (t.tid == tid) return t.signal;
  }
  return 0;
}

// The threads as the freezer would have copied them: registers from NT_PRSTATUS, no stack copy
// (the core is the copy), no /proc facts.
std::vector<native::ThreadCopy> thread_copies(const elf::CoreFile& core) {
  std::vector<native::ThreadCopy> copies;
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  for (const auto& t : core.threads()) {
    native::ThreadCopy copy;
    copy.tid = t.tid;
    copy.ns_tid = t.tid;
    copy.copied = true;
    copy.registers = native::registers_from_words(t.registers);
    copy.stat.state = '?';
    if (t.tid == core.process().pid) copy.stat.comm = core.process().command;
    copy.stat.utime_ticks = t.user_us * static_cast<std::uint64_t>(ticks_per_second) / 1'000'000;
    copy.stat.stime_ticks = t.system_us * static_cast<std::uint64_t>(ticks_per_second) / 1'000'000;
    copies.push_back(std::move(copy));
  }
  std::sort(copies.begin(), copies.end(),
            [](const native::ThreadCopy& a, const native::ThreadCopy& b) { return a.tid < b.tid; });
  return copies;
}

// The GNU build id in the ELF headers the core kept of a file mapped at `base` (the kernel keeps
// each ELF file's first page); "" when the core holds none.
std::string build_id_in_core(elf::CoreFile& core, std::uint64_t base) {
  std::vector<std::byte> page(4096);
  const std::size_t n = core.read(base, page.data(), page.size());
  if (n < sizeof(Elf64_Ehdr)) return {};
  page.resize(n);
  Elf64_Ehdr header;
  std::memcpy(&header, page.data(), sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_phentsize != sizeof(Elf64_Phdr))
    return {};
  std::uint64_t first_load = UINT64_MAX;
  std::vector<Elf64_Phdr> notes;
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    const std::uint64_t at = header.e_phoff + std::uint64_t{i} * sizeof(Elf64_Phdr);
    if (at + sizeof(Elf64_Phdr) > page.size()) break;
    Elf64_Phdr ph;
    std::memcpy(&ph, page.data() + at, sizeof ph);
    if (ph.p_type == PT_LOAD) first_load = std::min<std::uint64_t>(first_load, ph.p_vaddr);
    if (ph.p_type == PT_NOTE) notes.push_back(ph);
  }
  if (first_load == UINT64_MAX) return {};
  for (const auto& note : notes) {
    std::vector<std::byte> data(std::min<std::uint64_t>(note.p_memsz, 4096));
    const std::size_t got = core.read(base + note.p_vaddr - first_load, data.data(), data.size());
    std::uint64_t at = 0;
    while (at + sizeof(Elf64_Nhdr) <= got) {
      Elf64_Nhdr nh;
      std::memcpy(&nh, data.data() + at, sizeof nh);
      const std::uint64_t desc = at + sizeof nh + ((nh.n_namesz + 3) & ~3u);
      if (desc + nh.n_descsz > got) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4) {
        static constexpr char kHex[] = "0123456789abcdef";
        std::string hex;
        for (std::uint32_t i = 0; i < nh.n_descsz; ++i) {
          const auto byte = static_cast<unsigned>(data[desc + i]);
          hex += kHex[byte >> 4];
          hex += kHex[byte & 15];
        }
        return hex;
      }
      at = desc + ((nh.n_descsz + 3) & ~3u);
    }
  }
  return {};
}

// A file on this machine that is not the one the process ran gives wrong frames: named.
void check_build_ids(elf::CoreFile& core, elf::ProcessImage& image, model::ProcessDump& dump) {
  for (const proc::Mapping* mapping : image.file_mappings()) {
    if (mapping->offset != 0) continue;
    const std::string in_core = build_id_in_core(core, mapping->start);
    if (in_core.empty()) continue;
    const auto location = image.locate(mapping->start);
    if (!location || location->module == nullptr) continue;
    const std::string on_disk = location->module->elf().build_id();
    if (!on_disk.empty() && on_disk != in_core) {
      dump.notes.push_back(mapping->path + " is not the file the process ran (build id " + on_disk +
                           ", the core's " + in_core +
                           "): its frames may be wrong; give --sysroot with the machine's files");
    }
  }
}

// One core, read: the dump and what identifies the process.
struct CoreReading {
  model::ProcessDump dump;
  elf::CoreProcessInfo process;
  std::string executable;
  std::optional<std::map<std::string, std::string>> environment;
};

CoreReading read_core(const std::string& path, const CoreOptions& options) {
  const auto begin = std::chrono::steady_clock::now();
  PhaseTimer phases("core " + path + ", ");
  auto core = elf::CoreFile::open(path);
  CoreReading reading;
  reading.process = core->process();
  reading.executable = core->executable_path();
  if (reading.process.pid == 0) reading.process.pid = core->threads().front().tid;
  auto& dump = reading.dump;
  dump.pid = reading.process.pid;
  dump.command = reading.process.command;
  dump.notes.push_back(
      "read from the core file " + path + " (written by " +
      (core->written_by_gdb() ? "gdb's gcore" : "the kernel") +
      "): a core records no thread state, wait channel or CPU progress, so each thread's state "
      "is unknown ('?')");
  for (const auto& note : core->notes()) dump.notes.push_back(path + ": " + note);

  elf::ProcessImage image(
      std::make_shared<elf::SysrootFiles>(options.sysroot, reading.executable, options.executable),
      core->maps(), options.modules);
  CoreMemory memory(*core, image);
  phases.lap("core opened");

  std::unique_ptr<PythonSession> python;
  if (options.stacks != StackKinds::kNativeOnly) {
    Diagnostic note;
    python = PythonSession::open(image, memory, &note);
    if (python) {
      dump.python = python->interpreter().version.to_string();
      dump.distributed = python->read_process_groups();
    } else if (options.stacks == StackKinds::kPythonOnly ||
               note.code != DiagnosticCode::kNotPython) {
      dump.notes.push_back(note.text);
    }
  }
  std::vector<python::PyThread> py_threads;
  std::optional<python::AsyncTasks> tasks;
  if (python) {
    try {
      py_threads = python->read_threads(options.locals, 1);
    } catch (const Error& e) {
      dump.notes.push_back(std::string("Python stacks unavailable: ") + e.what());
    }
    if (options.tasks) tasks = python->read_tasks(py_threads, options.task_locals);
  }
  phases.lap("Python");

  const auto copies = thread_copies(*core);
  // The kernel gives every thread the signal that ended the process: said once.
  const auto& threads = core->threads();
  const bool one_signal =
      threads.front().signal != 0 &&
      std::all_of(threads.begin(), threads.end(),
                  [&](const elf::CoreThread& t) { return t.signal == threads.front().signal; });
  if (one_signal) {
    dump.notes.push_back("the process was ended by " + signal_name(threads.front().signal) +
                         ", which wrote the core");
  }
  NativeStacks native;
  if (options.stacks != StackKinds::kPythonOnly) {
    native = unwind_and_symbolize(copies, image, &memory, options.max_native_frames, phases);
  }
  for (std::size_t i = 0; i < copies.size(); ++i) {
    model::ThreadDump thread;
    thread.tid = copies[i].tid;
    thread.name = copies[i].stat.comm;
    thread.state = '?';
    thread.utime_ticks = copies[i].stat.utime_ticks;
    thread.stime_ticks = copies[i].stat.stime_ticks;
    if (!native.frames.empty()) {
      thread.native_frames = std::move(native.frames[i]);
      thread.frames = thread.native_frames;
      if (native.walks[i].end != WalkEnd::kComplete) {
        thread.notes.push_back(native.walks[i].stop_reason);
      }
    }
    if (const int signal = signal_of(*core, thread.tid); signal != 0 && !one_signal) {
      thread.notes.push_back("the core was written while this thread took " + signal_name(signal));
    }
    dump.threads.push_back(std::move(thread));
  }
  if (python && !py_threads.empty()) {
    ThreadMatcher matcher(copies, memory);
    attach_python(dump, py_threads, matcher, python->interpreter().module_path, options.stacks);
    if (tasks) attach_tasks(dump, std::move(*tasks), py_threads, matcher);
  }
  if (options.stacks != StackKinds::kPythonOnly) check_build_ids(*core, image, dump);
  for (auto& note : image.notes()) dump.notes.push_back(std::move(note));
  reading.environment = identity::environment_from_memory(image, memory, reading.executable);
  phases.lap("threads described and merged");
  dump.capture_time = std::chrono::steady_clock::now() - begin;
  return reading;
}

}  // namespace

model::ProcessDump capture_core(const std::string& path, const CoreOptions& options) {
  return read_core(path, options).dump;
}

model::ProcessRecord core_record(const std::string& path, const CoreOptions& options) {
  model::ProcessRecord record;
  try {
    CoreReading reading = read_core(path, options);
    record.pid = reading.process.pid;
    record.ppid = reading.process.ppid;
    record.comm = reading.process.command;
    record.state = '?';
    record.cmdline = mask_command_line(reading.process.arguments);
    record.exe = reading.executable;
    std::map<std::string, std::string> env =
        reading.environment.value_or(std::map<std::string, std::string>{});
    record.environment_source = reading.environment ? "memory" : "";
    record.identity = identity::identify(env, true, reading.process.arguments);
    record.environment = filter_environment(env);
    if (reading.dump.python) record.facts[model::fact_keys::kVersionPython] = *reading.dump.python;
    record.dump = std::move(reading.dump);
    identify_from_memory(record);
  } catch (const std::exception& e) {
    record.error = e.what();
  }
  return record;
}

}  // namespace hangscope::capture

// A core file as a capture target (kernel-written or gcore): its threads' registers and signals,
// its bytes or the mapped files' bytes, the files it names checked by build id; its record.
#include "hangscope/capture/core_capture.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "hangscope/common/redaction.h"
#include "hangscope/elf/core_file.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/identity/environment.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/native/registers.h"
#include "record_identity.h"

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

class CoreTarget final : public CaptureTarget {
 public:
  CoreTarget(const std::string& path, const CoreOptions& options)
      : path_(path),
        core_(elf::CoreFile::open(path)),
        process_(core_->process()),
        executable_(core_->executable_path()),
        image_(
            std::make_shared<elf::SysrootFiles>(options.sysroot, executable_, options.executable),
            core_->maps(), options.modules),
        memory_(*core_, image_) {
    if (process_.pid == 0) process_.pid = core_->threads().front().tid;
    // The kernel gives every thread the signal that ended the process: said once.
    const auto& threads = core_->threads();
    one_signal_ = threads.front().signal != 0 &&
                  std::all_of(threads.begin(), threads.end(), [&](const elf::CoreThread& t) {
                    return t.signal == threads.front().signal;
                  });
  }

  pid_t pid() const override { return process_.pid; }
  std::string command() const override { return process_.command; }
  std::string label() const override { return "core " + path_; }
  elf::ProcessImage& image() override { return image_; }
  memory::MemoryReader& memory() override { return memory_; }
  const elf::CoreProcessInfo& process() const { return process_; }
  const std::string& executable() const { return executable_; }

  std::vector<std::string> notes() const override {
    std::vector<std::string> notes{
        "read from the core file " + path_ + " (written by " +
        (core_->written_by_gdb() ? "gdb's gcore" : "the kernel") +
        "): a core records no thread state, wait channel or CPU progress, so each thread's "
        "state is unknown ('?')"};
    for (const auto& note : core_->notes()) notes.push_back(path_ + ": " + note);
    return notes;
  }

  // A core is one instant: whatever was asked, the reads that want one are made at it.
  ThreadCopies copy_threads(const CopyRequest& request) override {
    if (request.at_one_instant) request.at_one_instant();
    ThreadCopies copies;
    copies.threads = thread_copies(*core_);
    if (one_signal_) {
      copies.notes.push_back("the process was ended by " +
                             signal_name(core_->threads().front().signal) +
                             ", which wrote the core");
    }
    return copies;
  }

  bool holds_one_instant() const override { return true; }  // nothing in a core moves

  void add_thread_facts(const native::ThreadCopy& copy, model::ThreadDump& thread) override {
    if (const int signal = signal_of(*core_, copy.tid); signal != 0 && !one_signal_) {
      thread.notes.push_back("the core was written while this thread took " + signal_name(signal));
    }
  }

  void add_process_facts(const ReadOptions& options, model::ProcessDump& dump) override {
    if (options.stacks != StackKinds::kPythonOnly) check_build_ids(*core_, image_, dump);
  }

 private:
  std::string path_;
  std::unique_ptr<elf::CoreFile> core_;
  elf::CoreProcessInfo process_;
  std::string executable_;
  elf::ProcessImage image_;
  CoreMemory memory_;
  bool one_signal_ = false;
};

// The environment libc's `environ` held, from the core's memory.
identity::Environment environment_of(CoreTarget& target) {
  identity::Environment env;
  if (auto variables =
          identity::environment_from_memory(target.image(), target.memory(), target.executable())) {
    env.variables = std::move(*variables);
    env.source = identity::EnvironmentSource::kMemory;
  }
  return env;
}

}  // namespace

std::unique_ptr<CaptureTarget> open_core(const std::string& path, const CoreOptions& options) {
  return std::make_unique<CoreTarget>(path, options);
}

model::ProcessDump capture_core(const std::string& path, const CoreOptions& options) {
  const auto target = open_core(path, options);
  return assemble_dump(*target, options);
}

model::ProcessRecord core_record(const std::string& path, const CoreOptions& options) {
  model::ProcessRecord record;
  try {
    CoreTarget target(path, options);
    model::ProcessDump dump = assemble_dump(target, options);
    const identity::Environment env = environment_of(target);
    dump.capture_time = std::chrono::steady_clock::now() - target.began();
    const auto& process = target.process();
    record.pid = process.pid;
    record.ppid = process.ppid;
    record.comm = process.command;
    record.state = '?';
    record.cmdline = mask_command_line(process.arguments);
    record.exe = target.executable();
    identify_from_environment(record, env, process.arguments);
    if (dump.python) record.facts[model::fact_keys::kVersionPython] = *dump.python;
    record.dump = std::move(dump);
    identify_from_memory(record);
  } catch (const std::exception& e) {
    record.error = e.what();
  }
  return record;
}

}  // namespace hangscope::capture

// An ELF core file (written by the kernel or by gdb's gcore): the process's memory as dumped, its
// threads' registers and signals, and the files it had mapped.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/elf/elf_file.h"
#include "hangscope/elf/mapped_file.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/proc/maps.h"

namespace hangscope::elf {

// One thread's NT_PRSTATUS note.
struct CoreThread {
  pid_t tid = 0;   // as the dumping process saw it (the target's PID namespace for the kernel)
  int signal = 0;  // pr_cursig: the signal being delivered when the core was written (0: none)
  // CPU time the thread had used when the core was written, in microseconds.
  std::uint64_t user_us = 0;
  std::uint64_t system_us = 0;
  // The general-purpose registers as the kernel's user_regs_struct (x86-64: 27 words).
  std::array<std::uint64_t, 27> registers{};
};

// The NT_PRPSINFO note: the process as `ps` would have shown it.
struct CoreProcessInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = '?';
  std::string command;    // pr_fname: comm, at most 15 bytes
  std::string arguments;  // pr_psargs: the command line, spaces for NULs, at most 80 bytes
};

// What was dumped of one mapping (PT_LOAD): the dumped bytes cover [start, start + dumped).
struct CoreSegment {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t file_offset = 0;
  std::uint64_t dumped = 0;  // bytes present in the core (0 for mappings the filter left out)
  std::uint32_t flags = 0;   // PF_R | PF_W | PF_X
};

class CoreFile final : public memory::MemoryReader {
 public:
  // Maps and parses the core; throws hangscope::Error naming the path and the defect when it is
  // no ELF core (another ELF type, no PT_NOTE, no thread) or lies outside its own bounds.
  static std::unique_ptr<CoreFile> open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<CoreThread>& threads() const { return threads_; }
  const CoreProcessInfo& process() const { return process_; }
  const std::vector<CoreSegment>& segments() const { return segments_; }
  // The mappings, from PT_LOAD (permissions) and NT_FILE (files and their offsets). A file
  // mapping has device "core" and an inode made from its path (a core records neither).
  const proc::MemoryMap& maps() const { return maps_; }
  // An auxiliary-vector value (AT_PHDR, AT_EXECFN, …) from NT_AUXV.
  std::optional<std::uint64_t> auxv(std::uint64_t type) const;
  // The executable's path: the file mapped at AT_PHDR, else the first file NT_FILE names, else
  // "" (a core of a process that mapped no file).
  std::string executable_path() const;
  // Whether the core was written by gdb (gcore: a note section table) or by the kernel.
  bool written_by_gdb() const { return written_by_gdb_; }
  // What the parse noticed but could live with (a truncated note, a short file).
  const std::vector<std::string>& notes() const { return notes_; }

  // Only the bytes the core holds: mappings the core filter left out read as unreadable.
  std::size_t read(std::uint64_t address, void* out, std::size_t size) override;

 private:
  CoreFile(std::string path, std::unique_ptr<MappedFile> file);
  void parse();
  void parse_notes(std::span<const std::byte> notes);
  void parse_file_note(std::span<const std::byte> desc);
  void build_maps(const std::vector<proc::Mapping>& files);

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  std::vector<CoreThread> threads_;
  CoreProcessInfo process_;
  std::vector<CoreSegment> segments_;  // ascending start
  std::vector<std::pair<std::uint64_t, std::uint64_t>> auxv_;
  std::vector<proc::Mapping> file_mappings_;
  proc::MemoryMap maps_;
  bool written_by_gdb_ = false;
  std::vector<std::string> notes_;
};

}  // namespace hangscope::elf

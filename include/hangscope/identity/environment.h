// A process's environment: libc's live `environ` array read from memory (variables the process
// set itself, such as a launcher script's os.environ['MASTER_PORT'], and after setproctitle
// (vLLM, Ray) overwrote the memory /proc reads), else /proc/PID/environ.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "hangscope/elf/process_image.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/proc/process_fs.h"

namespace hangscope::identity {

// Where an environment was read from.
enum class EnvironmentSource {
  kNone,    // neither could be read
  kMemory,  // libc's environ, in the process's memory
  kProc,    // /proc/PID/environ (the environment it was started with)
};

// "memory", "proc", "" (a process record's environment_source).
std::string_view to_string(EnvironmentSource source);

struct Environment {
  std::map<std::string, std::string> variables;
  EnvironmentSource source = EnvironmentSource::kNone;
  std::string note;  // why the environment is missing, when it is
};

// NAME=VALUE entries separated by NULs; entries without '=' are ignored.
std::map<std::string, std::string> parse_environ_block(std::string_view block);

// The array libc's `environ` points to, read from memory (the executable `exe` first: a copy
// relocation moves the variable into it); nullopt when no libc or no variable is found.
std::optional<std::map<std::string, std::string>> environment_from_memory(
    elf::ProcessImage& image, memory::MemoryReader& memory, const std::string& exe);

// The array libc's `environ` points to (what the process sees now: variables its own code set,
// and after setproctitle); /proc/PID/environ (what it was started with) when that cannot be read.
Environment read_environment(const proc::ProcessFs& fs, elf::ProcessImage& image,
                             memory::MemoryReader& memory);

}  // namespace hangscope::identity

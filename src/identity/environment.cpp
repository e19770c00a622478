#include "hangscope/identity/environment.h"

#include <elf.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "hangscope/common/files.h"

namespace hangscope::identity {
namespace {

constexpr std::size_t kMaxVariables = 4096;
constexpr std::size_t kMaxValueBytes = 32 * 1024;

bool is_libc(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return name.rfind("libc.so", 0) == 0 || name.rfind("libc-", 0) == 0;
}

// A NUL-terminated string in the target, read in chunks, at most max bytes.
std::string read_c_string(memory::MemoryReader& memory, std::uint64_t address, std::size_t max) {
  std::string out;
  char chunk[256];
  while (out.size() < max) {
    const std::size_t n = memory.read(address + out.size(), chunk, sizeof chunk);
    if (n == 0) break;
    const void* nul = std::memchr(chunk, 0, n);
    if (nul != nullptr) {
      out.append(chunk, static_cast<const char*>(nul) - chunk);
      return out;
    }
    out.append(chunk, n);
  }
  return out;
}

std::string executable_path(const proc::ProcessFs& fs) {
  char buffer[4096];
  const ssize_t n = ::readlink((fs.dir() + "/exe").c_str(), buffer, sizeof buffer - 1);
  if (n <= 0) return {};
  std::string path(buffer, static_cast<std::size_t>(n));
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.size() > kDeleted.size() && path.ends_with(kDeleted))
    path.resize(path.size() - kDeleted.size());
  return path;
}

}  // namespace

// The executable first: when it refers to `environ`, a copy relocation moves the variable into
// the executable and libc's own symbol points at a stale copy.
std::optional<std::map<std::string, std::string>> environment_from_memory(
    elf::ProcessImage& image, memory::MemoryReader& memory, const std::string& exe) {
  std::vector<const proc::Mapping*> candidates;
  for (const proc::Mapping* mapping : image.file_mappings()) {
    if (mapping->path == exe)
      candidates.insert(candidates.begin(), mapping);
    else if (is_libc(mapping->path))
      candidates.push_back(mapping);
  }
  for (const proc::Mapping* mapping : candidates) {
    const auto location = image.locate(mapping->start);
    if (!location || location->module == nullptr) continue;
    std::optional<elf::Symbol> symbol = location->module->elf().find_symbol("__environ");
    if (!symbol) symbol = location->module->elf().find_symbol("environ");
    if (!symbol || symbol->type != STT_OBJECT) continue;
    const auto array = memory.read_value<std::uint64_t>(location->bias + symbol->value);
    if (!array || *array == 0) continue;
    std::string block;
    for (std::size_t i = 0; i < kMaxVariables; ++i) {
      const auto entry = memory.read_value<std::uint64_t>(*array + i * 8);
      if (!entry || *entry == 0) break;
      block += read_c_string(memory, *entry, kMaxValueBytes);
      block += '\0';
    }
    auto variables = parse_environ_block(block);
    if (!variables.empty()) return variables;
  }
  return std::nullopt;
}

std::map<std::string, std::string> parse_environ_block(std::string_view block) {
  std::map<std::string, std::string> variables;
  std::size_t pos = 0;
  while (pos < block.size() && variables.size() < kMaxVariables) {
    auto end = block.find('\0', pos);
    if (end == std::string_view::npos) end = block.size();
    const std::string_view entry = block.substr(pos, end - pos);
    pos = end + 1;
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    variables.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return variables;
}

std::string_view to_string(EnvironmentSource source) {
  switch (source) {
    case EnvironmentSource::kMemory:
      return "memory";
    case EnvironmentSource::kProc:
      return "proc";
    case EnvironmentSource::kNone:
      break;
  }
  return "";
}

Environment read_environment(const proc::ProcessFs& fs, elf::ProcessImage& image,
                             memory::MemoryReader& memory) {
  Environment env;
  // libc's environ first: it is what the process sees now, os.environ['MASTER_PORT'] = … of a
  // launcher script included (Python's putenv), and it survives setproctitle. /proc's copy is
  // the environment the process was started with.
  if (auto variables = environment_from_memory(image, memory, executable_path(fs))) {
    env.variables = std::move(*variables);
    env.source = EnvironmentSource::kMemory;
    return env;
  }
  const auto read = read_proc_file(fs.dir() + "/environ", 4u << 20);
  if (read.text) {
    env.variables = parse_environ_block(*read.text);
    if (!env.variables.empty()) {
      env.source = EnvironmentSource::kProc;
      return env;
    }
  }
  env.note = read.text
                 ? "environment unreadable: libc's environ was not found and /proc environ is empty"
                 : "environment unreadable: libc's environ was not found and /proc environ: " +
                       std::string(std::strerror(read.error));
  return env;
}

}  // namespace hangscope::identity

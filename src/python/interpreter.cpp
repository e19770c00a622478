#include "hangscope/python/interpreter.h"

#include <cstring>

#include "hangscope/python/version.h"

namespace hangscope::python {
namespace {

bool looks_like_python(const std::string& path) {
  return PythonVersion::from_file_name(path).has_value();
}

std::optional<std::uint64_t> runtime_vaddr(const elf::Module& module) {
  if (const auto symbol = module.elf().find_symbol("_PyRuntime")) return symbol->value;
  if (const auto* section = module.elf().section(".PyRuntime")) return section->address;
  return std::nullopt;
}

// Py_Version (3.11+) is a constant in the file: no need to read the target's memory.
std::optional<std::uint64_t> version_hex_from_file(const elf::Module& module) {
  const auto symbol = module.elf().find_symbol("Py_Version");
  if (!symbol) return std::nullopt;
  std::uint32_t value = 0;
  if (module.read_vaddr(symbol->value, &value, sizeof value) != sizeof value) return std::nullopt;
  return value;
}

}  // namespace

InterpreterSearch find_interpreter(elf::ProcessImage& image, memory::MemoryReader& memory) {
  InterpreterSearch search;
  std::string unreadable;
  std::optional<PythonVersion> without_runtime;  // 2.x and 3.0-3.6 have no _PyRuntime
  for (const proc::Mapping* mapping : image.file_mappings()) {
    const std::string& path = mapping->path;
    if (!looks_like_python(path)) continue;  // only the interpreter's files are opened
    const auto location = image.locate(mapping->start);
    if (!location || location->module == nullptr) {
      unreadable = path;
      continue;
    }
    const elf::Module& module = *location->module;
    const auto vaddr = runtime_vaddr(module);
    if (!vaddr) {  // e.g. pyenv's python3.X executable: the runtime is in libpython
      if (!without_runtime) without_runtime = PythonVersion::from_file_name(path);
      continue;
    }
    Interpreter interpreter;
    interpreter.runtime_address = location->bias + *vaddr;
    interpreter.module_path = path;
    if (const auto hex = version_hex_from_file(module)) {
      interpreter.version = PythonVersion::from_hex(*hex);
    } else {
      interpreter.version = *PythonVersion::from_file_name(path);
    }
    // 3.13+: the runtime starts with the debug offsets, whose header names the exact version.
    char cookie[8];
    std::uint64_t hex = 0;
    if (interpreter.version.at_least(3, 13) &&
        memory.read_exact(interpreter.runtime_address, cookie, sizeof cookie) &&
        std::memcmp(cookie, "xdebugpy", 8) == 0 &&
        memory.read_exact(interpreter.runtime_address + 8, &hex, sizeof hex)) {
      interpreter.version = PythonVersion::from_hex(hex);
    }
    search.interpreter = interpreter;
    return search;
  }
  if (without_runtime && !without_runtime->at_least(3, 7)) {
    search.problem = {DiagnosticCode::kPythonUnsupported,
                      "unsupported Python version " + without_runtime->to_string() +
                          " (hangscope reads CPython " + supported_versions() +
                          "): Python stacks unavailable"};
    return search;
  }
  if (unreadable.empty()) {
    search.problem = {
        DiagnosticCode::kNotPython,
        "not a Python process (no libpython or python executable with _PyRuntime is mapped)"};
  } else {
    search.problem = {DiagnosticCode::kPythonUnreadable,
                      "cannot read " + unreadable + ": Python stacks unavailable"};
  }
  return search;
}

}  // namespace hangscope::python

// Finds the CPython interpreter in a process: the module holding _PyRuntime, its address, version.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hangscope/common/diagnostic.h"
#include "hangscope/elf/process_image.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/python/version.h"

namespace hangscope::python {

struct Interpreter {
  PythonVersion version;
  std::uint64_t runtime_address = 0;  // &_PyRuntime in the target
  std::string module_path;            // the executable or libpython that holds it
};

struct InterpreterSearch {
  std::optional<Interpreter> interpreter;
  // Why there is none: kNotPython, kPythonUnsupported or kPythonUnreadable, with the text
  // for people (left empty when there is one).
  Diagnostic problem;
};

// Looks through the ELF files mapped into the process (the executable with a static
// libpython, or a libpython3.X.so) for _PyRuntime (symbol, else the .PyRuntime section), and
// reads the version from Py_Version, the 3.13+ debug offsets, or the file name. Never runs
// anything in or of the target.
InterpreterSearch find_interpreter(elf::ProcessImage& image, memory::MemoryReader& memory);

}  // namespace hangscope::python

#include "capture/python_session.h"

#include "hangscope/common/error.h"

namespace hangscope::capture {

std::unique_ptr<PythonSession> PythonSession::open(elf::ProcessImage& image,
                                                   memory::MemoryReader& memory,
                                                   std::string* note) {
  auto search = python::find_interpreter(image, memory);
  if (!search.interpreter) {
    *note = search.note;
    return nullptr;
  }
  const auto& interpreter = *search.interpreter;
  std::optional<python::Layout> layout = python::builtin_layout(interpreter.version);
  if (!layout) {
    const std::size_t size = python::debug_offsets_size(interpreter.version);
    std::vector<std::byte> table(size);
    if (size == 0) {
      *note = "Python " + interpreter.version.to_string() +
              " is not supported (known: 3.10 to 3.14): native stacks only";
      return nullptr;
    }
    if (!memory.read_exact(interpreter.runtime_address, table.data(), table.size())) {
      *note = "cannot read the _Py_DebugOffsets table of Python " + interpreter.version.to_string();
      return nullptr;
    }
    try {
      layout = python::layout_from_debug_offsets(table);
    } catch (const Error& e) {
      *note = std::string(e.what()) + ": native stacks only";
      return nullptr;
    }
  }
  return std::unique_ptr<PythonSession>(
      new PythonSession(interpreter, std::move(*layout), memory, image.maps()));
}

std::vector<python::PyThread> PythonSession::read_threads(bool locals, int attempts) {
  python::StackReaderOptions options;
  options.locals = locals;
  std::vector<python::PyThread> threads;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    python::ObjectReader objects(memory_, maps_, layout_);
    python::StackReader reader(objects, interpreter_.runtime_address, options);
    threads = reader.read_threads();
    bool torn = false;
    for (const auto& t : threads)
      torn = torn || (!t.error.empty() && t.error.rfind("stopped after", 0) != 0);
    if (!torn) break;
  }
  return threads;
}

}  // namespace hangscope::capture

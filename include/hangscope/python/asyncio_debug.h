// Finds the offsets CPython 3.14+'s _asyncio module publishes about its tasks
// (Py_AsyncioModuleDebugOffsets in the ELF section .AsyncioDebug) in a target, and chooses the
// asyncio layout from them (docs/python-capture.md, "asyncio tasks").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/elf/process_image.h"
#include "hangscope/memory/memory_reader.h"
#include "hangscope/python/asyncio_layout.h"

namespace hangscope::python {

struct AsyncioDebugTable {
  std::vector<std::byte> bytes;  // kAsyncioDebugSize bytes from the target; empty when not found
  std::uint64_t address = 0;     // where the table lies in the target
  std::string module_path;       // the file whose section it is
  std::string problem;           // why `bytes` is empty ("" when it was not looked for)
};

// Looks through the files mapped into the process that can hold _asyncio (the extension
// _asyncio*.so, or the executable or libpython when it is built in) for the section
// .AsyncioDebug, and reads the table at its load address from memory. Never throws.
AsyncioDebugTable read_asyncio_debug(elf::ProcessImage& image, memory::MemoryReader& memory);

// The asyncio layout of `layout`'s interpreter: for 3.14+ from `table` when it is sound, else
// the built-in 3.14 numbers with a note in `notes` saying why; nullopt for unknown versions.
std::optional<AsyncioLayout> choose_asyncio_layout(const Layout& layout,
                                                   const AsyncioDebugTable& table,
                                                   std::vector<std::string>& notes);

}  // namespace hangscope::python

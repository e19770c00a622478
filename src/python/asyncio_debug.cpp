#include "hangscope/python/asyncio_debug.h"

#include "hangscope/common/error.h"
#include "hangscope/python/version.h"

namespace hangscope::python {
namespace {

// _asyncio.cpython-314-x86_64-linux-gnu.so, or the interpreter's own files (built in).
bool may_hold_asyncio(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string_view name = slash == std::string::npos
                                    ? std::string_view(path)
                                    : std::string_view(path).substr(slash + 1);
  return name.starts_with("_asyncio") || PythonVersion::from_file_name(path).has_value();
}

}  // namespace

AsyncioDebugTable read_asyncio_debug(elf::ProcessImage& image, memory::MemoryReader& memory) {
  AsyncioDebugTable table;
  for (const proc::Mapping* mapping : image.file_mappings()) {
    if (!may_hold_asyncio(mapping->path)) continue;
    const auto location = image.locate(mapping->start);
    if (!location || location->module == nullptr) continue;  // ProcessImage notes the file
    const elf::Section* section = location->module->elf().section(".AsyncioDebug");
    if (section == nullptr) continue;
    table.module_path = mapping->path;
    if (section->size < kAsyncioDebugSize) {
      table.problem = "the .AsyncioDebug section of " + mapping->path + " is too small (" +
                      std::to_string(section->size) + " bytes)";
      return table;
    }
    table.address = location->bias + section->address;
    std::vector<std::byte> bytes(kAsyncioDebugSize);
    if (!memory.read_exact(table.address, bytes.data(), bytes.size())) {
      table.problem = "the .AsyncioDebug table of " + mapping->path + " cannot be read";
      return table;
    }
    table.bytes = std::move(bytes);
    return table;
  }
  table.problem = "no mapped _asyncio module has an .AsyncioDebug section";
  return table;
}

std::optional<AsyncioLayout> choose_asyncio_layout(const Layout& layout,
                                                   const AsyncioDebugTable& table,
                                                   std::vector<std::string>& notes) {
  if (!layout.version.at_least(3, 14)) return asyncio_layout(layout);
  auto fallback = asyncio_layout(layout);
  if (!fallback) return std::nullopt;
  const std::string built_in =
      "; asyncio tasks read with the built-in offsets of CPython 3.14.0 "
      "(tasks of finished threads, on the interpreter's list, not read)";
  if (table.bytes.empty()) {
    notes.push_back((table.problem.empty() ? "_asyncio's .AsyncioDebug table was not looked for"
                                           : table.problem) +
                    built_in);
    return fallback;
  }
  try {
    return asyncio_layout_from_debug(layout, table.bytes);
  } catch (const Error& e) {
    notes.push_back(std::string(e.what()) + " (in " + table.module_path + ")" + built_in);
    return fallback;
  }
}

}  // namespace hangscope::python

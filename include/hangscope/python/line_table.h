// Line numbers from CPython code objects' line tables, decoded exactly as CPython does.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

namespace hangscope::python {

// 3.10 (PEP 626, Objects/lnotab_notes.txt): pairs of (unsigned byte delta, signed line delta),
// line delta -128 = no line for that range. `byte_offset` is f_lasti * 2; a negative offset
// (frame not started) gives first_line. nullopt when the address has no line.
std::optional<int> line_for_offset_310(std::span<const std::byte> table, int first_line,
                                       int byte_offset);

// 3.11+ location table (InternalDocs/locations.md): variable-length entries, each covering
// 1-8 code units. `code_unit` is the instruction index (LASTI); negative gives first_line.
std::optional<int> line_for_offset_311(std::span<const std::byte> table, int first_line,
                                       int code_unit);

}  // namespace hangscope::python

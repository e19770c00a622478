// Test helper: hangscope's CPython layouts checked by the C compiler. A small C program is
// generated at test time, compiled against an installed CPython's own headers (internal ones
// included, with -DPy_BUILD_CORE) and run: it prints offsetof/sizeof of the fields a Layout
// names, which are compared with the Layout. No CPython struct is copied into the project.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "hangscope/python/layout.h"

namespace hangscope::testing {

// The headers of one installed CPython.
struct PythonHeaders {
  std::string label;        // gtest-safe: "pyenv_3_12_1", "debian_3_11"
  int minor = 0;            // 3.minor
  std::string include_dir;  // .../include/python3.minor (may be missing)
};

inline void PrintTo(const PythonHeaders& headers, std::ostream* out) {
  *out << headers.label << " (" << headers.include_dir << ")";
}

// Every CPython 3.10+ of pyenv ($PYENV_ROOT, $HOME/.pyenv, /root/.pyenv: versions/3.X.Y, as
// tests/support/python_targets.cpp finds them) and of the system (/usr/include/python3.X),
// whether or not its headers are installed.
std::vector<PythonHeaders> installed_python_headers();

// The pyenv or system headers for the interpreter at `python` (bin/python3 of a pyenv version,
// /usr/bin/python3), given its minor version.
PythonHeaders headers_of_interpreter(const std::string& python, int minor);

// What a probe against these headers needs and this machine lacks ("" when nothing): the
// header files the probe includes, or a C compiler.
std::string missing_for_probe(const PythonHeaders& headers);

// One number hangscope uses and the C expression that gives it (offsetof, sizeof, a constant).
struct LayoutCheck {
  std::string name;  // "tstate_frame", "tstate_frame (C type size)"
  std::uint64_t ours = 0;
  std::string c_expression;
};

// The checks of a layout of 3.minor: every offset it holds (and the size of every field's C
// type, and the sizes it copies, and the str state bits) against the headers' definitions.
std::vector<LayoutCheck> layout_checks(const python::Layout& layout, int minor);

// The checks of hangscope's positions inside _Py_DebugOffsets (3.13+): each member read, the
// table's header fields and its size. Empty for versions without the table.
std::vector<LayoutCheck> debug_table_checks(int minor);

// Compiles a C program printing every check's C expression against the headers, runs it and
// returns expression -> value. Throws std::runtime_error with the compiler's output.
std::map<std::string, std::uint64_t> probe(const PythonHeaders& headers,
                                           const std::vector<LayoutCheck>& checks);

}  // namespace hangscope::testing

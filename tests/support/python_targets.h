// Test helper: the CPython interpreters on this machine (pyenv builds and Debian's python3).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace hangscope::testing {

struct PythonInterpreter {
  std::string label;  // a gtest-safe name, e.g. "pyenv_3_12_1" or "debian_python3"
  std::string path;
};

inline void PrintTo(const PythonInterpreter& interpreter, std::ostream* out) {
  *out << interpreter.label << " (" << interpreter.path << ")";
}

// pyenv versions 3.10+ under $PYENV_ROOT, $HOME/.pyenv or /root/.pyenv, and /usr/bin/python3.
std::vector<PythonInterpreter> python_interpreters();

// A pyenv CPython older than 3.10 (unsupported by hangscope), when the machine has one.
std::vector<PythonInterpreter> old_python_interpreters();

}  // namespace hangscope::testing

// Test helper: the CPython interpreters on this machine (pyenv builds and Debian's python3).
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "target_process.h"

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

// tests/fixtures/python/secret_rank.py run as rank 0 of 1, with a secret in its command line
// (--api-key sk-planted-in-cmdline) and `env` added to its environment; its stdout and stderr go
// to `log`. Returns once the log shows vLLM's "non-default args" line (the rank is waiting).
std::unique_ptr<TargetProcess> start_secret_rank(const std::string& log,
                                                 const std::map<std::string, std::string>& env);

}  // namespace hangscope::testing

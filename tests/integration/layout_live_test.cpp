// 3.13+ layouts come from the interpreter's own _Py_DebugOffsets: on a live process of every
// such interpreter here, the table hangscope reads must agree with the C headers installed with
// that interpreter: the members hangscope reads are where offsetof puts them in
// _Py_DebugOffsets, and the whole Layout built from the live table (the table's offsets and the
// few hangscope adds) is what offsetof gives in PyThreadState, _PyInterpreterFrame, PyCodeObject
// and the rest (tests/support/layout_headers.cpp). 3.10-3.12 are checked without a process by
// tests/unit/layout_headers_test.cpp.
#include <gtest/gtest.h>

#include <cstring>

#include "hangscope/elf/process_image.h"
#include "hangscope/memory/process_memory.h"
#include "hangscope/proc/maps.h"
#include "hangscope/proc/process_fs.h"
#include "hangscope/python/interpreter.h"
#include "hangscope/python/layout.h"
#include "layout_headers.h"
#include "python_targets.h"
#include "target_process.h"

namespace hangscope {
namespace {

std::uint64_t u64_at(const std::vector<std::byte>& table, std::size_t position) {
  std::uint64_t value = 0;
  if (position + sizeof value <= table.size()) {
    std::memcpy(&value, table.data() + position, sizeof value);
  }
  return value;
}

class LiveDebugOffsets : public ::testing::TestWithParam<testing::PythonInterpreter> {};

TEST_P(LiveDebugOffsets, TheInterpretersOwnTableAgreesWithItsHeaders) {
  testing::TargetProcess target(
      {GetParam().path, "-c",
       "import sys, time\nprint('minor', sys.version_info[1], flush=True)\ntime.sleep(600)\n"});
  const int minor = std::stoi(target.wait_for_line("minor ").substr(6));
  const python::PythonVersion minor_version{3, minor, 0, 0};
  if (python::debug_offsets_size(minor_version) == 0) {
    GTEST_SKIP() << "CPython 3." << minor << " has no _Py_DebugOffsets hangscope reads";
  }
  const auto headers = testing::headers_of_interpreter(GetParam().path, minor);
  const std::string missing = testing::missing_for_probe(headers);
  if (!missing.empty()) {
    GTEST_SKIP() << "CPython 3." << minor << " (" << GetParam().path
                 << "): cannot compile the offsetof probe without " << missing;
  }

  // The table, read as hangscope reads it.
  proc::ProcessFs fs(target.pid());
  int error = 0;
  const auto maps = proc::read_memory_map(target.pid(), &error);
  ASSERT_TRUE(maps) << "cannot read the memory map: errno " << error;
  elf::ProcessImage image(fs, *maps);
  memory::ProcessMemory memory(target.pid());
  const auto search = python::find_interpreter(image, memory);
  ASSERT_TRUE(search.interpreter) << search.problem.text;
  const auto& version = search.interpreter->version;
  ASSERT_EQ(version.minor, minor);
  std::vector<std::byte> table(python::debug_offsets_size(version));
  ASSERT_TRUE(memory.read_exact(search.interpreter->runtime_address, table.data(), table.size()));
  python::Layout layout;
  try {
    layout = python::layout_from_debug_offsets(table);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }

  auto checks = testing::debug_table_checks(minor);
  const std::size_t table_checks = checks.size();
  const auto layout_checks = testing::layout_checks(layout, minor);
  checks.insert(checks.end(), layout_checks.begin(), layout_checks.end());
  std::map<std::string, std::uint64_t> values;
  try {
    values = testing::probe(headers, checks);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const auto& check = checks[i];
    const auto it = values.find(check.c_expression);
    ASSERT_NE(it, values.end()) << check.name;
    EXPECT_EQ(check.ours, it->second)
        << "CPython " << version.to_string() << " (" << headers.include_dir << "): " << check.name
        << " is " << check.ours << " in hangscope, " << check.c_expression << " = " << it->second;
    // A member of the table: the live value where the headers put it is the one hangscope reads.
    if (i < table_checks && check.name.rfind("_Py_DebugOffsets.", 0) == 0 &&
        check.name.find('.', 17) != std::string::npos) {
      EXPECT_EQ(u64_at(table, check.ours), u64_at(table, it->second)) << check.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, LiveDebugOffsets,
                         ::testing::ValuesIn(testing::python_interpreters()),
                         [](const auto& param_info) { return param_info.param.label; });

}  // namespace
}  // namespace hangscope

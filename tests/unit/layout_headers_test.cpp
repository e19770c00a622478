// hangscope's CPython layouts against the C compiler: for every CPython whose headers are
// installed, a C program compiled against them at test time (tests/support/layout_headers.cpp)
// prints offsetof and sizeof of each field a Layout names, and they must agree. 3.10-3.12: the
// built-in layouts; 3.13+: the positions read inside _Py_DebugOffsets (the offsets themselves
// come from a live interpreter's table: tests/integration/layout_live_test.cpp).
#include "layout_headers.h"

#include <gtest/gtest.h>

#include "hangscope/python/layout.h"

namespace hangscope {
namespace {

using testing::LayoutCheck;
using testing::PythonHeaders;

void expect_agree(const PythonHeaders& headers, const std::vector<LayoutCheck>& checks) {
  std::map<std::string, std::uint64_t> values;
  try {
    values = testing::probe(headers, checks);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  for (const auto& check : checks) {
    const auto it = values.find(check.c_expression);
    ASSERT_NE(it, values.end()) << check.name << ": the probe printed no " << check.c_expression;
    EXPECT_EQ(check.ours, it->second)
        << "CPython 3." << headers.minor << " (" << headers.include_dir << "): " << check.name
        << " is " << check.ours << " in hangscope, " << check.c_expression << " = " << it->second;
  }
}

class LayoutHeaders : public ::testing::TestWithParam<PythonHeaders> {
 protected:
  void SetUp() override {
    const std::string missing = testing::missing_for_probe(GetParam());
    if (!missing.empty()) {
      GTEST_SKIP() << "CPython 3." << GetParam().minor << " (" << GetParam().label
                   << "): cannot compile the offsetof probe without " << missing;
    }
  }
};

TEST_P(LayoutHeaders, BuiltinLayoutIsWhatTheHeadersDefine) {
  const auto& headers = GetParam();
  const auto layout = python::builtin_layout({3, headers.minor, 0, 0});
  if (!layout) {
    GTEST_SKIP() << "CPython 3." << headers.minor
                 << " has no built-in layout (read from its _Py_DebugOffsets)";
  }
  const auto checks = testing::layout_checks(*layout, headers.minor);
  EXPECT_GT(checks.size(), 80u);
  expect_agree(headers, checks);
}

TEST_P(LayoutHeaders, DebugTablePositionsAreWhatTheHeadersDefine) {
  const auto& headers = GetParam();
  const auto checks = testing::debug_table_checks(headers.minor);
  if (checks.empty()) GTEST_SKIP() << "CPython 3." << headers.minor << " has no _Py_DebugOffsets";
  expect_agree(headers, checks);
}

INSTANTIATE_TEST_SUITE_P(Installed, LayoutHeaders,
                         ::testing::ValuesIn(testing::installed_python_headers()),
                         [](const auto& param_info) { return param_info.param.label; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LayoutHeaders);

}  // namespace
}  // namespace hangscope

// The line-table decoders against every interpreter's own decoder (co_lines()), for every
// instruction of code objects chosen to exercise every entry form.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hangscope/python/line_table.h"
#include "python_targets.h"
#include "target_process.h"

namespace hangscope {
namespace {

std::vector<std::byte> from_hex(const std::string& hex) {
  std::vector<std::byte> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

class LineVectors : public ::testing::TestWithParam<testing::PythonInterpreter> {};

TEST_P(LineVectors, EveryInstructionGetsCPythonsLine) {
  testing::TargetProcess script(
      {GetParam().path, HANGSCOPE_SOURCE_DIR "/tests/fixtures/python/line_vectors.py"});
  std::string json_text;
  try {
    json_text = script.wait_for_line("{");
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const auto data = nlohmann::json::parse(json_text);
  const bool v310 = data["version"][1] == 10;
  int checked = 0;
  for (const auto& vector : data["vectors"]) {
    const auto table = from_hex(vector["linetable"].get<std::string>());
    const int first = vector["firstlineno"];
    const auto& lines = vector["lines"];
    for (std::size_t unit = 0; unit < lines.size(); ++unit) {
      const auto got = v310 ? python::line_for_offset_310(table, first, static_cast<int>(unit * 2))
                            : python::line_for_offset_311(table, first, static_cast<int>(unit));
      if (lines[unit].is_null()) {
        EXPECT_EQ(got, std::nullopt) << vector["name"] << " unit " << unit;
      } else {
        EXPECT_EQ(got, lines[unit].get<int>()) << vector["name"] << " unit " << unit;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, LineVectors,
                         ::testing::ValuesIn(testing::python_interpreters()),
                         [](const auto& param_info) { return param_info.param.label; });

}  // namespace
}  // namespace hangscope

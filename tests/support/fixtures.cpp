#include "fixtures.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace hangscope::testing {

std::string fixture_path(const std::string& relative) {
  return std::string(HANGSCOPE_SOURCE_DIR) + "/tests/fixtures/" + relative;
}

std::string fixture_text(const std::string& relative) {
  std::ifstream in(fixture_path(relative), std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) throw std::runtime_error("cannot read the fixture tests/fixtures/" + relative);
  return bytes.str();
}

}  // namespace hangscope::testing

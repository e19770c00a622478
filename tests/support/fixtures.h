// Test helper: the files under tests/fixtures, named by their path there ("gpu/x.csv").
#pragma once

#include <string>

namespace hangscope::testing {

// HANGSCOPE_SOURCE_DIR/tests/fixtures/RELATIVE (whether it exists is not checked).
std::string fixture_path(const std::string& relative);

// The bytes of tests/fixtures/RELATIVE; throws std::runtime_error naming it when unreadable.
std::string fixture_text(const std::string& relative);

}  // namespace hangscope::testing

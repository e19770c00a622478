// Test helper: finds threads and checks that named functions appear in a stack in order.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hangscope/model/process_dump.h"

namespace hangscope::testing {

const model::ThreadDump* find_thread(const model::ProcessDump& dump, const std::string& name);

// Index of the first frame at or after `from` whose function contains `needle`, or -1.
int frame_index(const model::ThreadDump& thread, const std::string& needle, int from = 0);

// Passes when every needle is found, innermost first, each further out than the previous.
::testing::AssertionResult has_frames_in_order(const model::ThreadDump& thread,
                                               const std::vector<std::string>& needles);

std::string describe_stack(const model::ThreadDump& thread);

}  // namespace hangscope::testing

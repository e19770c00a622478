#include "stack_assertions.h"

namespace hangscope::testing {

const model::ThreadDump* find_thread(const model::ProcessDump& dump, const std::string& name) {
  for (const auto& t : dump.threads) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int frame_index(const model::ThreadDump& thread, const std::string& needle, int from) {
  for (int i = from; i < static_cast<int>(thread.frames.size()); ++i) {
    if (thread.frames[static_cast<std::size_t>(i)].function.find(needle) != std::string::npos) {
      return i;
    }
  }
  return -1;
}

std::string describe_stack(const model::ThreadDump& thread) {
  std::string text = "thread " + std::to_string(thread.tid) + " " + thread.name + ":\n";
  for (const auto& f : thread.frames) {
    text += "  " + (f.function.empty() ? std::string("??") : f.function) + " (" + f.module + ")\n";
  }
  for (const auto& n : thread.notes) text += "  note: " + n + "\n";
  return text;
}

::testing::AssertionResult has_frames_in_order(const model::ThreadDump& thread,
                                               const std::vector<std::string>& needles) {
  int from = 0;
  for (const auto& needle : needles) {
    const int at = frame_index(thread, needle, from);
    if (at < 0) {
      return ::testing::AssertionFailure()
             << "'" << needle << "' not found at or after frame " << from << " in\n"
             << describe_stack(thread);
    }
    from = at + 1;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace hangscope::testing

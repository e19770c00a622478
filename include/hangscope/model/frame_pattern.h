// One frame pattern, the one vocabulary every user of frame names shares: the wait-primitive
// tables (waits), the framework tables (waits/frameworks), the serving chain, the ad-hoc checks
// of capture and analysis, and the signature rules' `frames` (docs/rules.md). Every field that
// is given must match the same frame.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/model/process_dump.h"

namespace hangscope::model {

// A compiled test of a frame's function name (the rules compile RE2 expressions; model links no
// regex engine). Shared by copies of a pattern: compiled once.
class FunctionTest {
 public:
  virtual ~FunctionTest() = default;
  virtual bool operator()(std::string_view name) const = 0;
};

struct FramePattern {
  // How `file` is compared with a Python frame's co_filename.
  enum class FileMatch {
    kContains,  // a '/'-separated fragment anywhere in the path (the built-in tables)
    kSuffix,    // the path ends with it ("vllm/x/y.py": a rule's `file`)
  };
  // How `functions` are compared with a frame.
  enum class NameMatch {
    kFunction,  // the frame's function (co_name, or the native symbol) exactly
    kQualname,  // the function, the qualname, or the qualname's last dotted part ("Cls.name")
  };

  std::string file;  // a Python frame's file ("" = any frame, native ones too)
  FileMatch file_match = FileMatch::kContains;
  std::vector<std::string> functions;  // any of these names ("" / none = any function)
  NameMatch name_match = NameMatch::kFunction;
  std::string native;  // a substring of a native frame's symbol ("" = not a native pattern)
  // A regular expression searched in the function or the qualname: its text, and the test its
  // user compiled from it. Given text with no test matches nothing.
  std::string function_regex;
  std::shared_ptr<const FunctionTest> function_test;

  // A Python pattern (a file and functions) in the built-in tables' form.
  static FramePattern python(std::string file, std::vector<std::string> functions = {});
  // A native pattern: a substring of the symbol.
  static FramePattern native_symbol(std::string fragment);

  bool empty() const;
  bool matches(const Frame& frame) const;
  // Whether `symbol` (a native symbol, however its user normalised it) holds `native`.
  bool matches_symbol(std::string_view symbol) const;
  // Whether `name` is one of `functions` (any name when there are none).
  bool names(std::string_view name) const;
};

using FramePatterns = std::vector<FramePattern>;

// The first frame of `frames` (innermost first) that some pattern matches; nullptr when none.
template <typename Frames>
const Frame* find_frame(const Frames& frames, const FramePatterns& patterns) {
  for (const auto& f : frames) {
    for (const auto& p : patterns) {
      if (p.matches(f)) return &f;
    }
  }
  return nullptr;
}

// Whether some thread's Python frames match one of `patterns`.
bool any_python_frame(const ProcessDump& dump, const FramePatterns& patterns);
// Whether some thread's native frames match one of `patterns`.
bool any_native_frame(const ProcessDump& dump, const FramePatterns& patterns);

}  // namespace hangscope::model
